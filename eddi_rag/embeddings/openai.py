"""OpenAI (and OpenAI-compatible) embeddings through langchain-openai's OpenAIEmbeddings."""

from __future__ import annotations

from typing import Any

from langchain_openai import OpenAIEmbeddings

from eddi_rag.embeddings.base import EmbeddingProvider
from eddi_rag.parameters import alias

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
        "max_retries": int(params.get("maxRetries", 0)),  # retries are ours (guard.py)
    }
    if params.get("dimensions"):
        kwargs["dimensions"] = int(params["dimensions"])
    if params.get("baseUrl"):
        kwargs["base_url"] = params["baseUrl"]
    if params.get("timeout"):
        kwargs["timeout"] = float(params["timeout"])
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
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "maxRetries": {"type": "integer", "minimum": 0, "default": 0, "description": "SDK retries, on top of eddi-rag's 3 attempts."},
    },
)
