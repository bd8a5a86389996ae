"""Mistral embeddings through langchain-mistralai."""

from __future__ import annotations

from typing import Any

from langchain_mistralai import MistralAIEmbeddings
from tokenizers import Tokenizer

from eddi_rag.common.parameters import alias
from eddi_rag.embeddings.base import MAX_RETRIES, TIMEOUT, EmbeddingProvider, timeout_seconds
from eddi_rag.embeddings.local import default_model_files

DEFAULT_MODEL = "mistral-embed"


def build(params: dict[str, Any]):
    kwargs: dict[str, Any] = {
        "model": params.get("model", DEFAULT_MODEL),
        "api_key": params["apiKey"],
        "max_retries": 0,
        # The integration sizes its batches by token count with a tokenizer it would download from
        # Hugging Face at start-up; never here: approximate with the shipped WordPiece tokenizer.
        "tokenizer": Tokenizer.from_file(str(default_model_files()[1])),
    }
    if params.get("baseUrl"):
        kwargs["endpoint"] = params["baseUrl"]
    if timeout_seconds(params):
        kwargs["timeout"] = int(max(1, round(timeout_seconds(params) or 1)))  # the client takes whole seconds
    return MistralAIEmbeddings(**kwargs)


PROVIDER = EmbeddingProvider(
    max_tokens=8192,
    name="mistral",
    build=build,
    default_model=DEFAULT_MODEL,
    required=("apiKey",),
    batch_size=100,
    parameters={
        "apiKey": {"type": "string"},
        "model": {"type": "string", "default": DEFAULT_MODEL},
        "modelName": alias("model"),
        "baseUrl": {"type": "string", "default": "https://api.mistral.ai/v1"},
        "dimensions": {"type": "integer", "minimum": 1, "description": "Checked against the vectors returned (mistral-embed: 1024)."},
        **TIMEOUT,
        **MAX_RETRIES,
    },
)
