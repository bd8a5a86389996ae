"""Azure OpenAI embeddings through langchain-openai's AzureOpenAIEmbeddings."""

from __future__ import annotations

from typing import Any

from langchain_openai import AzureOpenAIEmbeddings

from eddi_rag.embeddings.base import MAX_RETRIES, TIMEOUT, EmbeddingProvider, timeout_seconds

DEFAULT_DEPLOYMENT = "text-embedding-3-small"


def build(params: dict[str, Any]):
    kwargs: dict[str, Any] = {
        "azure_endpoint": params["endpoint"],
        "azure_deployment": params.get("deploymentName", DEFAULT_DEPLOYMENT),
        "api_key": params["apiKey"],
        "api_version": params.get("apiVersion", "2024-10-21"),
        "check_embedding_ctx_length": False,  # no tiktoken download (docs/architecture.md §6)
        "max_retries": 0,
    }
    if params.get("dimensions"):
        kwargs["dimensions"] = int(params["dimensions"])
    if timeout_seconds(params):
        kwargs["timeout"] = timeout_seconds(params)
    return AzureOpenAIEmbeddings(**kwargs)


PROVIDER = EmbeddingProvider(
    max_tokens=8191,
    name="azure-openai",
    build=build,
    default_model=DEFAULT_DEPLOYMENT,
    required=("apiKey", "endpoint"),
    batch_size=100,
    parameters={
        "apiKey": {"type": "string"},
        "endpoint": {"type": "string", "description": "https://<resource>.openai.azure.com"},
        "deploymentName": {"type": "string", "default": DEFAULT_DEPLOYMENT},
        "apiVersion": {"type": "string", "default": "2024-10-21"},
        "dimensions": {"type": "integer", "minimum": 1},
        **TIMEOUT,
        **MAX_RETRIES,
    },
)
