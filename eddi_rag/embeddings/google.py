"""Google embeddings through langchain-google-genai: the Gemini API (``gemini``/``google``, API
key) or Vertex AI (``vertex``: project + location, service-account or default credentials)."""

from __future__ import annotations

from typing import Any

from langchain_google_genai import GoogleGenerativeAIEmbeddings

from eddi_rag.common.parameters import alias
from eddi_rag.embeddings.base import MAX_RETRIES, TIMEOUT, EmbeddingProvider, timeout_seconds

GEMINI_MODEL = "gemini-embedding-2"
# A document is embedded as RETRIEVAL_DOCUMENT, a query as RETRIEVAL_QUERY (the class' defaults per side). A taskType
# naming one of them is not pinned: EDDI's configurations write RETRIEVAL_DOCUMENT, which pinned made every query a
# document (EDDI's 2026-09-21 fix); another task type is the author's choice for both sides.
ROLES = ("RETRIEVAL_DOCUMENT", "RETRIEVAL_QUERY")
VERTEX_MODEL = "text-embedding-005"


def _common(params: dict[str, Any], default_model: str) -> dict[str, Any]:
    kwargs: dict[str, Any] = {"model": params.get("model", default_model)}
    if params.get("dimensions"):
        kwargs["output_dimensionality"] = int(params["dimensions"])
    if params.get("baseUrl"):
        kwargs["base_url"] = params["baseUrl"]
    if params.get("taskType") and params["taskType"] not in ROLES:  # another task (clustering …): both sides use it
        kwargs["task_type"] = params["taskType"]
    if timeout_seconds(params):
        kwargs["request_options"] = {"timeout": timeout_seconds(params)}
    return kwargs


def build_gemini(params: dict[str, Any]):
    return GoogleGenerativeAIEmbeddings(google_api_key=  # type: ignore[call-arg]  # an alias of api_key
        params["apiKey"], vertexai=False, **_common(params, GEMINI_MODEL))


def build_vertex(params: dict[str, Any]):
    credentials = None
    if params.get("credentialsFile"):
        from google.oauth2 import service_account

        credentials = service_account.Credentials.from_service_account_file(
            params["credentialsFile"], scopes=["https://www.googleapis.com/auth/cloud-platform"])
    return GoogleGenerativeAIEmbeddings(vertexai=True, project=params["project"], location=params.get("location", "us-central1"),
                                        credentials=credentials, **_common(params, VERTEX_MODEL))


_SHARED = {
    "dimensions": {"type": "integer", "minimum": 1, "description": "Sent as outputDimensionality."},
    "outputDimensionality": alias("dimensions"),
    "baseUrl": {"type": "string", "description": "API endpoint override."},
    "taskType": {"type": "string", "description": "RETRIEVAL_DOCUMENT / RETRIEVAL_QUERY (the default: documents and "
                                                  "queries each with their own), or another task type for both sides"},
    "modelName": alias("model"),
    **MAX_RETRIES,
}
GEMINI = EmbeddingProvider(
    max_tokens=2048,
    name="gemini", build=build_gemini, default_model=GEMINI_MODEL, required=("apiKey",), batch_size=100, asymmetric=True,
    parameters={"apiKey": {"type": "string"}, "model": {"type": "string", "default": GEMINI_MODEL}, **_SHARED, **TIMEOUT},
)
GOOGLE = EmbeddingProvider(**{**GEMINI.__dict__, "name": "google"})
VERTEX = EmbeddingProvider(
    max_tokens=2048,
    name="vertex", build=build_vertex, default_model=VERTEX_MODEL, required=("project",), batch_size=100, asymmetric=True,
    parameters={
        "project": {"type": "string"},
        "location": {"type": "string", "default": "us-central1"},
        "credentialsFile": {"type": "string", "description": "Service-account JSON; default: application default credentials."},
        "model": {"type": "string", "default": VERTEX_MODEL},
        "endpoint": alias("baseUrl"),  # EDDI's name for it on vertex
        **_SHARED,
    },
)
