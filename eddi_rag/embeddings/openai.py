"""OpenAI (and OpenAI-compatible) embeddings through langchain-openai's OpenAIEmbeddings."""

from __future__ import annotations

from typing import Any

from langchain_openai import OpenAIEmbeddings

from eddi_rag.common.parameters import alias
from eddi_rag.embeddings.base import MAX_RETRIES, TIMEOUT, EmbeddingProvider, timeout_seconds

DEFAULT_MODEL = "text-embedding-3-small"


def build(params: dict[str, Any]) -> OpenAIEmbeddings:
    api_key = params.get("apiKey")
    if not api_key:
        raise ValueError("embeddingParameters.apiKey is required for the openai provider (e.g. \"${env:OPENAI_API_KEY}\")")
    kwargs: dict[str, Any] = {
        "model": params.get("model") or DEFAULT_MODEL,
        "api_key": api_key,
        # Sending raw strings: the token-length check would download tiktoken files (docs/architecture.md §6).
        "check_embedding_ctx_length": False,
        "max_retries": 0,  # retries are ours (guard.py; maxRetries sets them)
    }
    if params.get("organizationId"):
        kwargs["openai_organization"] = params["organizationId"]
    if params.get("projectId"):
        kwargs["default_headers"] = {"OpenAI-Project": params["projectId"]}
    if params.get("dimensions"):
        kwargs["dimensions"] = int(params["dimensions"])
    if params.get("baseUrl"):
        kwargs["base_url"] = params["baseUrl"]
    if timeout_seconds(params):
        kwargs["timeout"] = timeout_seconds(params)
    return OpenAIEmbeddings(**kwargs)


PROVIDER = EmbeddingProvider(
    max_tokens=8191,
    name="openai",
    build=build,
    default_model=DEFAULT_MODEL,
    required=("apiKey",),
    parameters={
        "apiKey": {"type": "string", "description": "Use a reference: ${env:OPENAI_API_KEY} or ${eddivault:KEY}."},
        "model": {"type": "string", "default": DEFAULT_MODEL},
        "modelName": alias("model"),
        "dimensions": {"type": "integer", "minimum": 1},
        "baseUrl": {"type": "string", "description": "Any OpenAI-compatible endpoint."},
        "organizationId": {"type": "string"},
        "projectId": {"type": "string", "description": "Sent as the OpenAI-Project header."},
        **TIMEOUT,
        **MAX_RETRIES,
    },
)
