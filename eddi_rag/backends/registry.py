"""Named plugins: built-ins plus the ``eddi_rag.stores`` / ``eddi_rag.embeddings`` entry points,
so a third-party package can add a backend by name.

A store entry is a class implementing ``KnowledgeStore`` (with ``capabilities`` and
``connection_schema()``); an embedding entry is an ``EmbeddingProvider``.

What every backend is (``described``: its capabilities and parameters' schema, or why it cannot load) is kept in a
file made at its first need (``EDDI_RAG_CACHE_DIR``, default ``~/.cache/eddi-rag``), named by what it depends on: this
package's version and backend modules, the entry points, every installed distribution and Python's version. Reading
it imports no backend (describing them all imports every client library: 3 s of the Manager's first Configuration
page here).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
from importlib import import_module
from importlib.metadata import distributions, entry_points
from importlib.util import find_spec
from pathlib import Path
from typing import Any

from eddi_rag.common.parameters import ALIAS, normalise
from eddi_rag.common.secrets import REFERENCE
from eddi_rag.errors import CONFIGURATION, EddiRagError

STORES, EMBEDDINGS = "eddi_rag.stores", "eddi_rag.embeddings"
KINDS = {"stores": STORES, "embeddings": EMBEDDINGS}

BUILTIN: dict[str, dict[str, str]] = {
    STORES: {
        "in-memory": "eddi_rag.stores.embedded.memory:InMemoryStore",
        "sqlite": "eddi_rag.stores.embedded.sqlite:SqliteStore",
        "pgvector": "eddi_rag.stores.pgvector:PgVectorStore",
        "qdrant": "eddi_rag.stores.qdrant:QdrantStore",
        "sqlite-vec": "eddi_rag.stores.embedded.sqlite_vec:SqliteVecStore",
        "chroma": "eddi_rag.stores.chroma:ChromaStore",
        "elasticsearch": "eddi_rag.stores.elasticsearch:ElasticsearchStore",
        "mongodb-atlas": "eddi_rag.stores.mongodb_atlas:MongoAtlasStore",
        "typesense": "eddi_rag.stores.typesense:TypesenseStore",
    },
    EMBEDDINGS: {
        "local": "eddi_rag.embeddings.local:PROVIDER",
        "local-multilingual": "eddi_rag.embeddings.multilingual:PROVIDER",
        "openai": "eddi_rag.embeddings.openai:PROVIDER",
        "azure-openai": "eddi_rag.embeddings.azure_openai:PROVIDER",
        "ollama": "eddi_rag.embeddings.ollama:PROVIDER",
        "mistral": "eddi_rag.embeddings.mistral:PROVIDER",
        "cohere": "eddi_rag.embeddings.cohere:PROVIDER",
        "bedrock": "eddi_rag.embeddings.bedrock:PROVIDER",
        "gemini": "eddi_rag.embeddings.google:GEMINI",
        "google": "eddi_rag.embeddings.google:GOOGLE",
        "vertex": "eddi_rag.embeddings.google:VERTEX",
    },
}
_FIELD = {STORES: "storeType", EMBEDDINGS: "embeddingProvider"}
_PARAMS = {STORES: "storeParameters", EMBEDDINGS: "embeddingParameters"}

# Optional dependencies of built-ins: import name -> the extra that installs it.
EXTRAS = {
    "psycopg": "pgvector", "qdrant_client": "qdrant", "chromadb": "chroma", "typesense": "typesense", "apsw": "sqlite-vec", "sqlite_vec": "sqlite-vec",
    "langchain_ollama": "ollama", "langchain_mistralai": "mistral", "langchain_cohere": "cohere",
    "langchain_aws": "bedrock", "botocore": "bedrock", "langchain_google_genai": "google",
}


class UnknownProviderError(EddiRagError, ValueError):
    status = 409
    failure = CONFIGURATION


class ProviderUnavailableError(EddiRagError, RuntimeError):
    """A registered provider whose optional dependencies are not installed."""
    status = 503


def _points(group: str) -> tuple[Any, ...]:
    """The installed entry points of ``group``, read once per search path (reading them opens every installed
    distribution's metadata: 0.09 s, on each knowledge base's validation before; a path added since is read then)."""
    return _points_on(group, tuple(sys.path))


@functools.lru_cache(maxsize=32)
def _points_on(group: str, path: tuple[str, ...]) -> tuple[Any, ...]:
    return tuple(entry_points(group=group))


def names(group: str) -> list[str]:
    return sorted(set(BUILTIN[group]) | {ep.name for ep in _points(group)})


def load(group: str, name: str) -> Any:
    if name in BUILTIN[group]:
        module, _, attr = BUILTIN[group][name].partition(":")
        try:
            return getattr(import_module(module), attr)
        except ModuleNotFoundError as e:
            extra = EXTRAS.get((e.name or "").split(".")[0])
            hint = f"pip install 'eddi-rag[{extra}]'" if extra else f"install {e.name}"
            raise ProviderUnavailableError(f"{_FIELD[group]} {name!r} needs {e.name}: {hint}") from e
    for ep in _points(group):
        if ep.name == name:
            return ep.load()
    raise UnknownProviderError(f"unknown {_FIELD[group]} {name!r}; known: {', '.join(names(group))}")


def store_types() -> list[str]:
    return names(STORES)


# stores whose data lives in this process or its machine's files: a fleet's other machines cannot reach them
EMBEDDED_STORES = ("in-memory", "sqlite", "sqlite-vec")


def shared_store_types() -> list[str]:
    """The store types every machine of a fleet can reach (servers of their own)."""
    return [n for n in store_types() if n not in EMBEDDED_STORES]


def embedding_providers() -> list[str]:
    return names(EMBEDDINGS)


CACHE_DIR = "EDDI_RAG_CACHE_DIR"


def _fingerprint() -> str:
    """What the backends' descriptions depend on, as a digest (a change of any makes them again; 0.09 s: every
    installed distribution is read)."""
    from eddi_rag.version import __version__

    h = hashlib.sha256(f"{__version__}\n{sys.version}\n{sorted(BUILTIN.items())!r}".encode())
    for group in KINDS.values():
        h.update(repr(sorted((ep.name, ep.value) for ep in entry_points(group=group))).encode())
        for target in BUILTIN[group].values():  # (an edited backend module, in a working copy)
            spec = find_spec(target.partition(":")[0])
            if spec is not None and spec.origin:
                stat = os.stat(spec.origin)
                h.update(f"{spec.origin}:{stat.st_mtime_ns}:{stat.st_size}".encode())
    h.update(repr(sorted((d.metadata["Name"] or "", d.version) for d in distributions())).encode())
    return h.hexdigest()[:20]


def _cache_file(fingerprint: str) -> Path:
    root = os.environ.get(CACHE_DIR) or os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "eddi-rag")
    return Path(root) / f"backends-{fingerprint}.json"


@functools.cache
def described() -> dict[str, dict[str, dict[str, Any]]]:
    """``describe`` of every backend, {group: {name: …}}: once a process (until ``forget``), from the cache file, else
    made (and the file written, when it can be)."""
    path = _cache_file(_fingerprint())
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        found = {group: {n: describe(group, n) for n in names(group)} for group in KINDS.values()}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(found), encoding="utf-8")
            tmp.replace(path)
        except OSError:  # (a read-only home: made again by the next process)
            pass
    return found


def forget() -> None:
    """Describe the backends again at the next need (a package installed or registered since)."""
    described.cache_clear()
    _points_on.cache_clear()


def description(group: str, name: str) -> dict[str, Any]:
    """``describe(group, name)``, from ``described`` (UnknownProviderError for a name no backend has)."""
    found = described().get(group, {}).get(name)
    return found if found is not None else describe(group, name)


def describe(group: str, name: str) -> dict[str, Any]:
    """{name, capabilities, schema} of one provider; {name, error} when it cannot be loaded."""
    try:
        entry = load(group, name)
    except ProviderUnavailableError as e:
        return {"name": name, "available": False, "error": str(e)}
    return {"name": name, "available": True, "capabilities": sorted(entry.capabilities), "schema": entry.connection_schema()}


def _allow_references(schema: dict[str, Any]) -> dict[str, Any]:
    """Any parameter may be a secret reference instead of its declared type."""
    reference = {"type": "string", "pattern": REFERENCE.pattern}
    props = {k: {"anyOf": [v, reference]} for k, v in schema.get("properties", {}).items() if ALIAS not in v}
    return {**schema, "properties": props}


def parameter_names(name: str) -> set[str]:
    """The embeddingParameters an embedding provider takes (empty when it or its extra is missing)."""
    try:
        return set(load(EMBEDDINGS, name).connection_schema().get("properties", {}))
    except (UnknownProviderError, ProviderUnavailableError):
        return set()


def prepare_parameters(group: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` as the provider takes them: EDDI's aliases renamed, strings coerced to the declared
    types (call it on resolved parameters). Raises ValueError naming the parameter."""
    schema = load(group, name).connection_schema()
    out, errors = normalise(schema, params, _PARAMS[group])
    if errors:
        raise ValueError("; ".join(f"{e['path']}: {e['message']}" for e in errors))
    if group == EMBEDDINGS:  # an embedding parameter the provider does not take is ignored (see unused_embedding_parameters)
        out = {k: v for k, v in out.items() if k in schema.get("properties", {})}
    return out


# Keys that name where an embedding provider sends data (EDDI's EmbeddingParameters.ENDPOINT_KEYS, compared
# case-insensitively): one the provider does not take would send every document to its default endpoint instead, so
# EDDI refuses it at save and when the model is built (since 2026-10); so do we.
ENDPOINT_KEYS = frozenset({"baseurl", "endpoint", "url", "serverurl", "host", "apibase", "base_url", "api_base", "apiurl"})


def ignored_endpoints(name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Errors ({path, message, value}) for an endpoint-like embedding parameter provider ``name`` does not take."""
    try:
        known = load(EMBEDDINGS, name).connection_schema().get("properties", {})
    except (UnknownProviderError, ProviderUnavailableError):
        return []
    return [{"path": f"$.{_PARAMS[EMBEDDINGS]}.{key}", "value": value,
             "message": f"{key!r} is not a parameter of embeddingProvider {name!r}, so documents and queries would go to "
                        f"its default endpoint instead (EDDI refuses it too); it takes: {', '.join(known) or 'none'}"}
            for key, value in sorted(params.items()) if key not in known and key.lower() in ENDPOINT_KEYS]


def unused_embedding_parameters(name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Warnings ({path, message, value}) for the embeddingParameters provider ``name`` does not take. EDDI logs and
    ignores such a parameter (an export carries leftovers such as ``logRequests`` or ``numCtx``); so do we,
    and the save, the import report and Health say so. Store parameters have no such leeway."""
    try:
        known = load(EMBEDDINGS, name).connection_schema().get("properties", {})
    except (UnknownProviderError, ProviderUnavailableError):
        return []
    return [{"path": f"$.{_PARAMS[EMBEDDINGS]}.{key}", "value": value,
             "message": f"{key!r} is not a parameter of embeddingProvider {name!r}: ignored (it takes: {', '.join(known) or 'none'})"}
            for key, value in params.items() if key not in known and key.lower() not in ENDPOINT_KEYS]


def validate_parameters(group: str, name: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    """Errors ({path, message, value}) of ``params`` against the provider's connection schema
    (after EDDI's aliases are renamed and strings coerced to the declared types)."""
    field = _PARAMS[group]
    try:
        schema = load(group, name).connection_schema()
    except ProviderUnavailableError:
        return []  # cannot check without the extra; building the store will say what is missing
    known = schema.get("properties", {})
    errors = ignored_endpoints(name, params) if group == EMBEDDINGS else [  # else a warning (unused_embedding_parameters)
        {"path": f"$.{field}.{key}", "value": value,
         "message": f"unknown parameter {key!r} for {_FIELD[group]} {name!r}; known: {', '.join(known) or 'none'}"}
        for key, value in params.items() if key not in known
    ]
    checked, coercion = normalise(schema, {k: v for k, v in params.items() if k in known}, field)
    errors += coercion
    bad = {e["path"].rsplit(".", 1)[-1] for e in coercion}
    checked = {k: v for k, v in checked.items() if k not in bad}
    from jsonschema import Draft202012Validator  # (at the first check: not on every start's path)

    for err in Draft202012Validator(_allow_references(schema)).iter_errors(checked):
        path = f"$.{field}" + err.json_path[1:]
        message = err.message
        if err.validator == "anyOf" and not err.path:  # a missing alternative of required keys
            message = "needs one of: " + " or ".join(", ".join(s["required"]) for s in err.validator_value)
        elif err.validator == "anyOf":  # a bad value: say what the declared type wanted
            declared = [e for e in err.context if e.relative_schema_path[0] == 0]
            message = declared[0].message if declared else message
        errors.append({"path": path, "message": message, "value": err.instance})
    return errors
