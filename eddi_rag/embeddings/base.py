"""What an embedding provider is: a name, a builder of LangChain ``Embeddings``, and the JSON
Schema of its ``embeddingParameters``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langchain_core.embeddings import Embeddings


@dataclass(frozen=True)
class EmbeddingProvider:
    name: str
    build: Callable[[dict[str, Any]], Embeddings]
    parameters: dict[str, Any]  # JSON Schema "properties" of embeddingParameters
    required: tuple[str, ...] = ()
    default_model: str | None = None
    batch_size: int = 100  # most texts one API call may carry
    max_tokens: int = 8191  # the model's input limit in tokens: markdown chunking keeps chunks within it
    remote: bool = True  # remote providers get batching, retries and dimension checks (guard.py)
    capabilities: frozenset[str] = field(default_factory=lambda: frozenset({"embeddings"}))

    def connection_schema(self) -> dict[str, Any]:
        return {"type": "object", "properties": self.parameters, "required": list(self.required),
                "additionalProperties": False}
