"""Cohere embeddings through langchain-cohere."""

from __future__ import annotations

from typing import Any

from langchain_cohere import CohereEmbeddings

from eddi_rag.common.parameters import alias
from eddi_rag.embeddings.base import MAX_RETRIES, TIMEOUT, EmbeddingProvider, timeout_seconds

DEFAULT_MODEL = "embed-english-v3.0"


def build(params: dict[str, Any]):
    return CohereEmbeddings(  # type: ignore[call-arg]  # client/async_client are built by the class
        model=params.get("model", DEFAULT_MODEL),
        cohere_api_key=params["apiKey"],
        base_url=params.get("baseUrl"),
        max_retries=0,
        request_timeout=timeout_seconds(params),
    )


PROVIDER = EmbeddingProvider(
    max_tokens=512,
    name="cohere",
    build=build,
    default_model=DEFAULT_MODEL,
    required=("apiKey",),
    batch_size=96,  # Cohere's limit per embed call
    asymmetric=True,  # search_document / search_query (langchain-cohere's embed_documents / embed_query)
    parameters={
        "apiKey": {"type": "string"},
        "model": {"type": "string", "default": DEFAULT_MODEL},
        "modelName": alias("model"),
        "baseUrl": {"type": "string", "default": "https://api.cohere.com"},
        "dimensions": {"type": "integer", "minimum": 1, "description": "Checked against the vectors returned (v3 models: 1024)."},
        **TIMEOUT,
        **MAX_RETRIES,
    },
)
