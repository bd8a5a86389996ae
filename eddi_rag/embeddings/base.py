"""What an embedding provider is: a name, a builder of LangChain ``Embeddings``, and the JSON
Schema of its ``embeddingParameters``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddi_rag.embeddings.model import Embedder

# Parameters of EDDI's that most remote providers honour (its configs/rag/model/EmbeddingParameters.java).
TIMEOUT: dict[str, Any] = {
    "timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Per-request timeout in milliseconds, as EDDI's."},
    "timeoutSeconds": {"type": "number", "exclusiveMinimum": 0, "description": "The same in seconds (timeout before it was EDDI's)."},
}
MAX_RETRIES: dict[str, Any] = {
    "maxRetries": {"type": "integer", "minimum": 0, "maximum": 10,
                   "description": "Retries after a failed call (429, 5xx, connection error); default 2, i.e. 3 attempts."},
}


def timeout_seconds(params: dict[str, Any]) -> float | None:
    """The per-request timeout in seconds: ``timeoutSeconds``, else EDDI's ``timeout`` in milliseconds."""
    if params.get("timeoutSeconds"):
        return float(params["timeoutSeconds"])
    return float(params["timeout"]) / 1000 if params.get("timeout") else None


@dataclass(frozen=True)
class EmbeddingProvider:
    name: str
    build: Callable[[dict[str, Any]], Embedder]
    parameters: dict[str, Any]  # JSON Schema "properties" of embeddingParameters
    required: tuple[str, ...] = ()
    default_model: str | None = None
    batch_size: int = 100  # most texts one API call may carry
    max_tokens: int = 8191  # the model's input limit in tokens: markdown chunking keeps chunks within it
    remote: bool = True  # remote providers get batching, retries and dimension checks (guard.py)
    asymmetric: bool = False  # documents and queries are embedded with two task types (embed_query is not embed_documents)
    capabilities: frozenset[str] = field(default_factory=lambda: frozenset({"embeddings"}))
    # The languages the model reads, given its parameters (None: many, or not known): a hybrid search asked in
    # another language is ordered by its keyword side (retrieval.retriever).
    languages: Callable[[dict[str, Any]], frozenset[str] | None] = lambda params: None

    def connection_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.parameters, "required": list(self.required),
                "additionalProperties": False}
