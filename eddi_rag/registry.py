"""Named plugins: built-ins plus the ``eddi_rag.stores`` / ``eddi_rag.embeddings`` entry points,
so a third-party package can add a backend by name."""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import entry_points
from typing import Any

BUILTIN: dict[str, dict[str, str]] = {
    "eddi_rag.stores": {
        "in-memory": "eddi_rag.stores.memory:InMemoryStore",
        "sqlite": "eddi_rag.stores.sqlite:SqliteStore",
        "pgvector": "eddi_rag.stores.pgvector:PgVectorStore",
    },
    "eddi_rag.embeddings": {
        "local": "eddi_rag.embeddings.local:build",
        "openai": "eddi_rag.embeddings.openai:build",
    },
}
_FIELD = {"eddi_rag.stores": "storeType", "eddi_rag.embeddings": "embeddingProvider"}


# Optional dependencies of built-ins: import name -> the extra that installs it.
EXTRAS = {"psycopg": "pgvector"}


class UnknownProviderError(ValueError):
    pass


class ProviderUnavailableError(RuntimeError):
    """A registered provider whose optional dependencies are not installed."""


def names(group: str) -> list[str]:
    return sorted(set(BUILTIN[group]) | {ep.name for ep in entry_points(group=group)})


def load(group: str, name: str) -> Any:
    if name in BUILTIN[group]:
        module, _, attr = BUILTIN[group][name].partition(":")
        try:
            return getattr(import_module(module), attr)
        except ModuleNotFoundError as e:
            extra = EXTRAS.get((e.name or "").split(".")[0])
            hint = f"pip install 'eddi-rag[{extra}]'" if extra else f"install {e.name}"
            raise ProviderUnavailableError(f"{_FIELD[group]} {name!r} needs {e.name}: {hint}") from e
    for ep in entry_points(group=group):
        if ep.name == name:
            return ep.load()
    raise UnknownProviderError(f"unknown {_FIELD[group]} {name!r}; known: {', '.join(names(group))}")


def store_types() -> list[str]:
    return names("eddi_rag.stores")


def embedding_providers() -> list[str]:
    return names("eddi_rag.embeddings")
