"""Configuration models: RagConfiguration and the RAG fields of an LLM task.

The JSON Schema in ``schemas/rag-configuration.schema.json`` is the source of truth for
validation; the pydantic models give typed access with the same defaults (a test keeps
the two in step).
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from jsonschema import Draft202012Validator
from pydantic import BaseModel, ConfigDict, Field

SCHEMA_FILE = "rag-configuration.schema.json"


class ConfigValidationError(ValueError):
    """A configuration failed validation. ``errors`` is a list of {path, message, value}."""

    def __init__(self, errors: list[dict[str, Any]]):
        self.errors = errors
        super().__init__("; ".join(f"{e['path']}: {e['message']}" for e in errors))


@lru_cache(maxsize=None)
def load_schema(name: str = SCHEMA_FILE) -> dict[str, Any]:
    text = resources.files("eddi_rag").joinpath("schemas", name).read_text(encoding="utf-8")
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    return schema


class RagConfiguration(BaseModel):
    """EDDI's ``ai.labs.rag`` resource. Unknown keys are ignored, as EDDI does."""

    model_config = ConfigDict(extra="ignore")

    name: str
    embeddingProvider: str = "openai"
    embeddingParameters: dict[str, Any] = Field(default_factory=dict)
    storeType: str = "in-memory"
    storeParameters: dict[str, Any] = Field(default_factory=dict)
    chunkStrategy: str = "recursive"
    chunkSize: int = 512
    chunkOverlap: int = 64
    maxResults: int = 5
    minScore: float = 0.6
    searchMode: str = "vector"
    fusion: str = "weighted"
    vectorWeight: float = 0.7
    maxDistance: float | None = None
    recencyWindow: float = 0.01
    ttlSeconds: float | None = None
    requiredMetadata: list[str] = Field(default_factory=list)
    contextExpansion: str = "none"
    expansionNeighbors: int = 1
    maxPassageChars: int = 4000

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def _schema_errors(data: Any, schema: dict[str, Any]) -> list[dict[str, Any]]:
    validator = Draft202012Validator(schema)
    errors = []
    for err in sorted(validator.iter_errors(data), key=lambda e: (e.json_path, e.message)):
        errors.append({"path": err.json_path, "message": err.message, "value": err.instance})
    return errors


def validate_rag_configuration(data: Any) -> RagConfiguration:
    """Validate raw JSON against the schema (plus cross-field rules) and build the model."""
    errors = _schema_errors(data, load_schema())
    if not errors:
        size, overlap = data.get("chunkSize", 512), data.get("chunkOverlap", 64)
        if overlap >= size:
            errors.append({
                "path": "$.chunkOverlap",
                "message": f"chunkOverlap ({overlap}) must be smaller than chunkSize ({size})",
                "value": overlap,
            })
    if errors:
        raise ConfigValidationError(errors)
    return RagConfiguration.model_validate(data)


# --- the RAG fields of an LLM task -------------------------------------------------------


class KnowledgeBaseRef(BaseModel):
    """An explicit reference from an LLM task to a knowledge base, by name."""

    model_config = ConfigDict(extra="ignore")

    name: str
    maxResults: int | None = Field(default=None, ge=1)
    minScore: float | None = Field(default=None, ge=0, le=1)


class RagDefaults(BaseModel):
    """Overrides applied to every auto-discovered knowledge base; an absent field keeps the KB's value."""

    model_config = ConfigDict(extra="ignore")

    maxResults: int | None = Field(default=None, ge=1)
    minScore: float | None = Field(default=None, ge=0, le=1)


NO_RELEVANT_CONTEXT = ("No passage in the knowledge bases is relevant to this question. Tell the user that "
                       "you found nothing about it in the knowledge bases; do not make up an answer from them.")


class LlmTaskRag(BaseModel):
    """RAG-related fields of an EDDI LLM task (``tasks[]`` of an llm configuration)."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    knowledgeBases: list[KnowledgeBaseRef] | None = None
    enableWorkflowRag: bool = False
    ragDefaults: RagDefaults | None = None
    httpCallRag: str | None = None
    maxRagContextChars: int | None = 20000
    # none | neighbors | section; None: each knowledge base's own contextExpansion
    contextExpansion: Literal["none", "neighbors", "section"] | None = None
    # Put under "## Relevant Context:" when the knowledge bases answered but no passage passed;
    # empty: say nothing.
    noRelevantContextMessage: str = NO_RELEVANT_CONTEXT
