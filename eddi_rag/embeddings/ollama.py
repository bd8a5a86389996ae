"""Ollama embeddings (``/api/embed``) through langchain-ollama."""

from __future__ import annotations

from typing import Any

from langchain_ollama import OllamaEmbeddings

from eddi_rag.common.parameters import alias
from eddi_rag.embeddings.base import MAX_RETRIES, TIMEOUT, EmbeddingProvider, timeout_seconds

DEFAULT_MODEL = "nomic-embed-text"
DEFAULT_URL = "http://localhost:11434"


def build(params: dict[str, Any]):
    kwargs: dict[str, Any] = {"model": params.get("model", DEFAULT_MODEL), "base_url": params.get("baseUrl", DEFAULT_URL),
                              "validate_model_on_init": False}
    if params.get("dimensions"):
        kwargs["dimensions"] = int(params["dimensions"])
    if timeout_seconds(params):
        kwargs["sync_client_kwargs"] = {"timeout": timeout_seconds(params)}
    return OllamaEmbeddings(**kwargs)


PROVIDER = EmbeddingProvider(
    max_tokens=2048,
    name="ollama",
    build=build,
    default_model=DEFAULT_MODEL,
    batch_size=100,
    parameters={
        "model": {"type": "string", "default": DEFAULT_MODEL},
        "modelName": alias("model"),
        "baseUrl": {"type": "string", "default": DEFAULT_URL},
        "dimensions": {"type": "integer", "minimum": 1},
        **TIMEOUT,
        **MAX_RETRIES,
    },
)
