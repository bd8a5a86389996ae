"""Which embedding backend a knowledge base (or the runtime) uses: by reference to an entry of the
providers map (``embeddingProviderId``, REQ-EMB-010), or by name (``embeddingProvider``, REQ-EMB-011).

A providers map entry is a versioned resource ``eddi://ai.labs.providers/providerstore/providers/<id>``
holding ``{type, apiKey?, baseUrl?, …}``; its ``type`` gives the backend through PROVIDER_TYPES and its
key and URL become the backend's ``apiKey``/``baseUrl`` (the KB's own ``embeddingParameters`` win).
A reference that resolves to nothing (an unknown id, a type without embeddings), or neither field
set, leaves embedding *disabled* with the reason: health, doctor, traces and errors say it; nothing
crashes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddi_rag.config import RagConfiguration, load_schema, schema_errors
from eddi_rag.errors import CONFIGURATION, EddiRagError

ENTRY_SCHEMA = "provider.schema.json"

# A provider entry's type -> our embedding provider (None: that type has no embeddings). The
# embedding spec's "local" backend is Ollama; our own "local" is the in-process model.
PROVIDER_TYPES: dict[str, str | None] = {
    "openai": "openai",
    "gemini": "google",
    "google": "google",
    "vertex": "vertex",
    "ollama": "ollama",
    "azure": "azure-openai",
    "azure-openai": "azure-openai",
    "mistral": "mistral",
    "cohere": "cohere",
    "bedrock": "bedrock",
    "local": "local",
    "anthropic": None,
    "deepseek": None,
    "groq": None,
    "xai": None,
}
NEEDS_NO_KEY = {"ollama", "local"}
CARRIED = ("apiKey", "baseUrl")  # what an entry gives a backend whose parameters cannot be read


class EmbeddingDisabledError(EddiRagError, RuntimeError):
    """The knowledge base (or the runtime) has no embedding backend: ``reason`` says why. Only its configuration can
    help (retrying will not)."""
    status = 409
    failure = CONFIGURATION


@dataclass(frozen=True)
class Resolution:
    provider: str | None  # our embedding provider; None: disabled
    parameters: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None  # why disabled
    via: str | None = None  # the providers map entry it came from

    @property
    def disabled(self) -> bool:
        return self.provider is None


def resolve(provider_id: str | None, provider: str | None, parameters: dict[str, Any] | None,
            read_entry: Callable[[str], dict[str, Any] | None], declared: Callable[[str], set[str]] = lambda _: set()) -> Resolution:
    """The backend and its parameters. ``read_entry(id)``: the providers map entry, or None when there
    is none; ``declared(provider)``: the parameter names that backend takes (other entry keys such as
    ``model`` are carried when it declares them)."""
    own = dict(parameters or {})
    if provider_id:
        entry = read_entry(provider_id)
        if entry is None:
            return Resolution(None, reason=f"embeddingProviderId {provider_id!r} names no entry of the providers map "
                                           f"(/providerstore/providers/{provider_id})")
        kind = str(entry.get("type") or "").strip().lower()
        backend = PROVIDER_TYPES.get(kind)
        if backend is None:
            known = ", ".join(k for k, v in PROVIDER_TYPES.items() if v)
            return Resolution(None, via=provider_id, reason=(
                f"provider {provider_id!r} has type {kind or '(none)'!r}, which has no embeddings (types with embeddings: {known})"))
        wanted = declared(backend) or set(CARRIED)  # what the backend takes (unknown when its extra is missing)
        carried = {k: v for k, v in entry.items() if k in wanted and k != "type" and v not in (None, "")}
        if backend in NEEDS_NO_KEY:
            carried.pop("apiKey", None)
        return Resolution(backend, {**carried, **own}, via=provider_id)
    if provider:
        return Resolution(provider, own)
    return Resolution(None, reason="neither embeddingProviderId nor embeddingProvider is set (EDDI would embed with openai; set embeddingProvider)")


def resolve_config(config: RagConfiguration, read_entry: Callable[[str], dict[str, Any] | None],
                   declared: Callable[[str], set[str]] = lambda _: set()) -> RagConfiguration:
    """``config`` with ``embeddingProvider``/``embeddingParameters`` as resolved (or marked disabled)."""
    if not config.embeddingProviderId:  # by name, or neither (its embedding_disabled says so): nothing to resolve
        return config
    found = resolve(config.embeddingProviderId, config.embeddingProvider, config.embeddingParameters, read_entry, declared)
    return config.with_embedding(found.provider, found.parameters if found.provider else config.embeddingParameters, found.reason)


def entry_errors(data: Any) -> list[dict[str, Any]]:
    """A providers map entry's errors against schemas/provider.schema.json ({path, message, value})."""
    return schema_errors(data, load_schema(ENTRY_SCHEMA))
