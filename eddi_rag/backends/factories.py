"""Caches of built embedding models and store objects, one per configuration.

Keys use the *unresolved* parameters (secret references, never secrets). Both caches are
bounded with idle expiry; a store object holds no data of its own, so eviction loses nothing.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from eddi_rag.backends import registry
from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.common.secrets import DEFAULT_TENANT, SecretResolver, resolve_parameters
from eddi_rag.common.telemetry import TracedEmbeddings
from eddi_rag.config import ConfigValidationError, RagConfiguration
from eddi_rag.embeddings.cache import CachedEmbeddings, StateVectorCache, VectorCache
from eddi_rag.embeddings.guard import ATTEMPTS, GuardedEmbeddings
from eddi_rag.embeddings.model import Embedder
from eddi_rag.embeddings.references import EmbeddingDisabledError
from eddi_rag.state.sqlite import Database
from eddi_rag.stores import langchain4j
from eddi_rag.stores.base import KnowledgeStore, StoreContext, StoreUnavailableError
from eddi_rag.stores.ownership import (
    CLAIMED,
    CREATED,
    NAMED,
    UNVERIFIED,
    AdoptionRequiredError,
    Place,
    StoreOwnership,
    canonical,
    server_of,
)

T = TypeVar("T")

# Where the application has a data directory, an ``in-memory`` knowledge base (EDDI's default storeType) is kept by the
# embedded SQLite store in it: every serving process of a ``serve`` reads it, and it outlives a restart (EDDI's keeps it
# in one process's memory, gone at a restart: nothing an EDDI client does loses data here). Without one (``Runtime()``)
# everything is in this process's memory anyway.
KEPT_ON_DISK = {"in-memory": "sqlite"}


class BoundedCache(Generic[T]):
    def __init__(self, max_entries: int = 50, idle_seconds: float = 1800):
        self.max_entries, self.idle_seconds = max_entries, idle_seconds
        self._items: OrderedDict[str, tuple[float, T]] = OrderedDict()
        self._lock = threading.Lock()

    def has(self, key: str) -> bool:
        """Whether ``key`` is built (and not idle past its time)."""
        with self._lock:
            found = self._items.get(key)
            return found is not None and time.monotonic() - found[0] <= self.idle_seconds

    def get_or_build(self, key: str, build: Callable[[], T]) -> T:
        now = time.monotonic()
        with self._lock:
            for k in [k for k, (t, _) in self._items.items() if now - t > self.idle_seconds]:
                del self._items[k]
            if key in self._items:
                self._items.move_to_end(key)
                value = self._items[key][1]
                self._items[key] = (now, value)
                return value
        value = build()
        with self._lock:
            self._items[key] = (now, value)
            while len(self._items) > self.max_entries:
                self._items.popitem(last=False)
        return value

    def invalidate(self, predicate: Callable[[str], bool] = lambda _: True) -> None:
        with self._lock:
            for k in [k for k in self._items if predicate(k)]:
                del self._items[k]

    def __len__(self) -> int:
        return len(self._items)


def cache_key(*parts: Any) -> str:
    return json.dumps(parts, sort_keys=True, default=str)


NO_EMBEDDING_FIX = ('save the knowledge base with embeddingProvider set ("local" embeds offline, on this machine) or an '
                    'embeddingProviderId that resolves, then ingest again')


def embedding_key(config: RagConfiguration) -> str:
    """Identifies the embedding model of a configuration (provider + unresolved parameters); the
    factory caches models under the same key."""
    if config.embedding_disabled:  # no model: each such KB reports its own reason
        return cache_key(None, config.name, config.embedding_disabled)
    return cache_key(config.embeddingProvider, config.embeddingParameters)


class EmbeddingModelFactory:
    """One model per (provider, parameters), wrapped in the persistent embedding cache."""

    def __init__(self, cache: VectorCache | Database | None, resolver: SecretResolver | None = None,
                 outbound: OutboundPolicy | None = None, **cache_args: Any):
        """``cache``: where vectors are kept (a state database means its table; None: no cache).
        ``outbound``: which endpoints a remote provider may be pointed at (default: EDDI_RAG_OUTBOUND_ALLOW)."""
        self.vectors = StateVectorCache(cache) if hasattr(cache, "transaction") else cache  # type: ignore[arg-type]
        self.resolver = resolver or SecretResolver()
        self.outbound = outbound or OutboundPolicy.from_env()
        self._cache: BoundedCache[Embedder] = BoundedCache(**cache_args)

    def get(self, provider: str, params: dict[str, Any], tenant: str = DEFAULT_TENANT) -> Embedder:
        """The model of ``provider`` with ``params``, their secrets read in ``tenant`` (models are not shared across tenants)."""
        return self._cache.get_or_build(cache_key(provider, params, tenant), lambda: self._build(provider, params, tenant))

    def _build(self, provider: str, params: dict[str, Any], tenant: str) -> Embedder:
        spec = registry.load(registry.EMBEDDINGS, provider)
        if ignored := registry.ignored_endpoints(provider, params):  # (a configuration stored before it was refused)
            raise ConfigValidationError(ignored)
        resolved = resolve_parameters(params, self.resolver, tenant)
        self.outbound.check_endpoints(params, resolved, f"embeddingParameters of {provider!r}")
        resolved = registry.prepare_parameters(registry.EMBEDDINGS, provider, resolved)
        model = spec.build(resolved)
        name = getattr(model, "model_name", None) or getattr(model, "model", None) or str(resolved.get("model", ""))
        model = TracedEmbeddings(model, provider, str(name) or None, spec.remote)  # (an OpenTelemetry span a call, opt-in)
        if spec.remote:
            dims = resolved.get("dimensions")
            retries = resolved.get("maxRetries")  # EDDI's: retries after the first attempt
            model = GuardedEmbeddings(model, provider, spec.batch_size, int(dims) if isinstance(dims, int) else None,
                                      1 + int(retries) if isinstance(retries, int) else ATTEMPTS)
        if self.vectors is None:
            return model
        return CachedEmbeddings(model, self.vectors, provider, str(name), resolved.get("dimensions"), spec.asymmetric)

    def built(self, config: RagConfiguration) -> bool:
        """Whether the KB's model is made already (a search may make it beside other work when it is not)."""
        return bool(config.embeddingProvider) and self._cache.has(cache_key(config.embeddingProvider or "", config.embeddingParameters,
                                                                             config.tenant))

    def for_config(self, config: RagConfiguration) -> Embedder:
        """The KB's model. Raises EmbeddingDisabledError when it has none (see embeddings.references)."""
        if config.embedding_disabled or not config.embeddingProvider:
            raise EmbeddingDisabledError(f"knowledge base {config.name!r}: embedding disabled: {config.embedding_disabled}; "
                                         f"{NO_EMBEDDING_FIX}")
        return self.get(config.embeddingProvider, config.embeddingParameters, config.tenant)


# Engines whose keyword search analyses text by the knowledge base's ``language`` setting, not each chunk's: PostgreSQL's
# full-text search on an adopted table, Typesense's locale, Elasticsearch's and Atlas Search's analyzers, Qdrant's
# full-text index (docs/languages.md).
ANALYSE_BY_SETTING = frozenset({"pgvector", "typesense", "elasticsearch", "mongodb-atlas", "qdrant"})


class EmbeddingStoreFactory:
    """One store object per (storeType, configuration id, parameters). A store is built only for a knowledge
    base whose tenant holds its physical place, or when nobody does (stores.ownership: then it is claimed)."""

    def __init__(self, context: StoreContext, resolver: SecretResolver | None = None,
                 outbound: OutboundPolicy | None = None, ownership: StoreOwnership | None = None, **cache_args: Any):
        """``outbound``: which store servers a configuration may name (default: EDDI_RAG_OUTBOUND_ALLOW).
        ``ownership``: who holds each physical store (None: not checked, for a store factory outside a runtime)."""
        self.context, self.resolver = context, resolver or SecretResolver()
        self.outbound = outbound or OutboundPolicy.from_env()
        self.ownership = ownership
        self._cache: BoundedCache[KnowledgeStore] = BoundedCache(**cache_args)

    def _parameters(self, kb_id: str, config: RagConfiguration, params: dict[str, Any]) -> dict[str, Any]:
        """What the store class is given: EDDI's aliases read, EDDI's layout applied (stores.langchain4j)."""
        eddi_table = config.storeType == "pgvector" and "table" in params and not params.get("url")
        params = registry.prepare_parameters(registry.STORES, config.storeType, params)
        if eddi_table:  # EDDI's own parameter: EDDI's connection defaults (database and user "eddi")
            params = {"database": "eddi", "user": "eddi", **params}
        params = langchain4j.adopt(config.storeType, config.eddi_layout, kb_id, config.name, params)
        if config.storeType in ANALYSE_BY_SETTING:
            params[langchain4j.LANGUAGE] = config.language
        return params

    def place(self, kb_id: str, config: RagConfiguration, params: dict[str, Any] | None = None) -> Place | None:
        """The physical store ``config`` addresses for ``kb_id`` (None: an embedded engine, whose tables are the
        KB's own). ``params``: resolved store parameters (default: as written, references unresolved)."""
        cls = self.store_class(config.storeType)
        locate = getattr(cls, "place", None)
        if locate is None:
            return None
        given = self._parameters(kb_id, config, dict(config.storeParameters if params is None else params))
        name = str(locate(kb_id, given, self.context))
        shown = f"{given['path']}#{name.rpartition('#')[2]}" if "#" in name and given.get("path") else name
        return Place(config.storeType, canonical(config.storeType, name), config.eddi_layout or "ours",
                     config.eddi_layout == "name" or any(k in config.storeParameters for k in NAMED),
                     server_of(given), shown)

    @staticmethod
    def _what(kb_id: str, config: RagConfiguration) -> str:
        return f"knowledge base {kb_id!r}: {config.storeType} store"

    def exists(self, kb_id: str, config: RagConfiguration) -> bool:
        """Whether the physical store ``config`` names exists already (its engine asked; StoreUnavailableError
        when it cannot be reached). Nothing is claimed, created or cached."""
        store = self._construct(kb_id, config)
        with unavailable(self._what(kb_id, config), self.resolver.redact):
            exists = getattr(store, "exists", None)  # (every engine with a place() has it)
            return bool(exists()) if exists is not None else False

    def get(self, kb_id: str, config: RagConfiguration) -> KnowledgeStore:
        where = config.storeParameters if config.eddi_layout is None else \
            {**config.storeParameters, "storeNamespace": config.eddi_layout, "name": config.name}  # EDDI's: by name
        key = cache_key(config.storeType, kb_id, where)
        return self._cache.get_or_build(key, lambda: self._build(key, kb_id, config))

    def store_class(self, store_type: str) -> type:
        """The class that keeps ``store_type``'s data in this application (``KEPT_ON_DISK``)."""
        if self.context.data_dir is not None and store_type in KEPT_ON_DISK:
            store_type = KEPT_ON_DISK[store_type]
        return registry.load(registry.STORES, store_type)

    def _construct(self, kb_id: str, config: RagConfiguration, claim: bool = False) -> KnowledgeStore:
        cls = self.store_class(config.storeType)
        params = resolve_parameters(config.storeParameters, self.resolver, config.tenant)
        what = self._what(kb_id, config)
        self.outbound.check_endpoints(config.storeParameters, params, f"{what}: storeParameters")
        held = place = None
        if claim and self.ownership is not None and (place := self.place(kb_id, config, params)) is not None:
            held = self.ownership.claim(config.tenant, kb_id, place, CLAIMED)  # (a KB saved before claims were recorded)
        with unavailable(what, self.resolver.redact):  # e.g. a client that connects when it is made
            store = cls(kb_id, self._parameters(kb_id, config, params), self.context)
        if held == UNVERIFIED and place is not None and self.ownership is not None:  # saved while its engine could not be asked: asked now, first
            with unavailable(what, self.resolver.redact):
                exists = bool(store.exists())
            if exists:
                raise AdoptionRequiredError(
                    f"{place.describe()} existed already when {what} first reached it, and no knowledge base held it: "
                    "nothing was read or written. An admin of this tenant adopts it by saving the knowledge base with "
                    "?adopt=true (it is then never dropped), or names another")
            self.ownership.claim(config.tenant, kb_id, place, CREATED)
        return store

    def _build(self, key: str, kb_id: str, config: RagConfiguration) -> KnowledgeStore:
        store = self._construct(kb_id, config, claim=True)
        # a store whose engine failed is built anew at its next use (a fresh connection once the engine is back)
        forget = lambda: self._cache.invalidate(lambda k: k == key)  # noqa: E731
        return GuardedStore(store, self._what(kb_id, config), self.resolver.redact, forget,  # type: ignore[return-value]
                            rebuild=lambda: self._construct(kb_id, config))

    def evict(self, kb_id: str) -> None:
        self._cache.invalidate(lambda k: json.loads(k)[1] == kb_id)


@contextlib.contextmanager
def unavailable(what: str, redact: Callable[[str], str], on_failure: Callable[[], None] = lambda: None) -> Iterator[None]:
    """Any failure but a ValueError (a bad request or configuration) or an ImportError (a missing
    extra) becomes StoreUnavailableError: the engine is down, refused us or timed out."""
    try:
        yield
    except (ValueError, ImportError, StoreUnavailableError):
        raise
    except Exception as e:  # noqa: BLE001 - every engine client raises its own kinds
        on_failure()
        raise StoreUnavailableError(redact(f"{what} unavailable: {type(e).__name__}: {e}")) from e


class GuardedStore:
    """A store whose every call reports an unreachable engine as StoreUnavailableError (HTTP 503,
    a trace entry in an LLM turn, an ingestion left pending until the engine is back). A store that answered
    before and fails now (its engine restarted under a kept connection) is built again and the call tried once
    more (every store call may be repeated: writes are upserts by id), so the first call after a restart works."""

    def __init__(self, store: KnowledgeStore, what: str, redact: Callable[[str], str], on_failure: Callable[[], None],
                 rebuild: Callable[[], KnowledgeStore] | None = None):
        self._store, self._what, self._redact, self._on_failure, self._rebuild = store, what, redact, on_failure, rebuild
        self._answered = False

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._store, name)
        if not callable(value) or name in ("health", "connection_schema"):  # health reports, never raises
            return value

        def guarded(*args: Any, **kwargs: Any) -> Any:
            try:
                with unavailable(self._what, self._redact):
                    result = getattr(self._store, name)(*args, **kwargs)
            except StoreUnavailableError:
                if not (self._answered and self._rebuild is not None):
                    self._on_failure()
                    raise
                self._answered = False
                with unavailable(self._what, self._redact, self._on_failure):
                    self._store = self._rebuild()
                    result = getattr(self._store, name)(*args, **kwargs)
            self._answered = True
            return result
        return guarded
