"""A persistent embedding cache keyed by SHA-256 of (provider, model, dimensions, text).

Wraps any LangChain ``Embeddings``: only texts not seen before reach the provider, so
re-ingesting unchanged text costs no provider call. The vectors live in the application's state database
(the default: its SQLite file, or the PostgreSQL a fleet shares) or Redis (shared by several processes or hosts).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Protocol

from eddi_rag import state
from eddi_rag.common import metrics
from eddi_rag.embeddings.model import Embedder, EmbeddingModel
from eddi_rag.state.sqlite import StateDatabase


def cache_key(provider: str, model: str, dimensions: int | None, text: str) -> str:
    h = hashlib.sha256()
    for part in (provider, model, str(dimensions or ""), text):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


class VectorCache(Protocol):
    def get_many(self, keys: list[str]) -> dict[str, bytes]: ...
    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None: ...


class StateVectorCache:
    """The vectors in the state database's ``embedding_cache`` table."""

    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        found: dict[str, bytes] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            rows = self.db.query(f"SELECT key, vector FROM embedding_cache WHERE key IN ({','.join('?' * len(part))})", part)
            found.update({r["key"]: r["vector"] for r in rows})
        return found

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        with self.db.transaction() as c:
            c.executemany("INSERT INTO embedding_cache VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET vector=excluded.vector",
                          list(items))


class RedisVectorCache:
    """Vectors under ``<prefix><sha256>``; ``ttlSeconds`` (optional) lets Redis expire them."""

    def __init__(self, url: str, prefix: str = "eddi-rag:emb:", ttl_seconds: int | None = None):
        import redis

        self.client = redis.Redis.from_url(url)
        self.prefix, self.ttl = prefix, ttl_seconds

    def get_many(self, keys: list[str]) -> dict[str, bytes]:
        if not keys:
            return {}
        values: list[bytes | None] = self.client.mget([self.prefix + k for k in keys])  # type: ignore[assignment]  # bytes: no decoding
        return {k: v for k, v in zip(keys, values) if v is not None}

    def put_many(self, items: Iterable[tuple[str, bytes]]) -> None:
        with self.client.pipeline(transaction=False) as pipe:
            for key, value in items:
                pipe.set(self.prefix + key, value, ex=self.ttl)
            pipe.execute()


def open_cache(spec: str | None, db: StateDatabase) -> VectorCache | None:
    """``None``/``sqlite``/``state``: the application's state database; ``redis://...``: a Redis server; ``none``: no cache."""
    if spec == "none":
        return None
    if spec in (None, "", "sqlite", "state"):
        return StateVectorCache(db)
    if spec.startswith(("redis://", "rediss://", "unix://")):
        return RedisVectorCache(spec)
    raise ValueError(f"unknown embedding cache {spec!r}: use 'sqlite', 'none' or a redis:// URL")


class CachedEmbeddings(EmbeddingModel):
    """``inner``'s vectors kept in ``cache``. ``asymmetric``: the model embeds a query with another task type than a
    document (Cohere's search_query, Gemini's RETRIEVAL_QUERY): a query is then embedded as a query and cached apart,
    never handed a document's vector (EDDI's 2026-09-21 fix: "stop embedding queries as documents")."""

    def __init__(self, inner: Embedder, cache: VectorCache, provider: str, model: str, dimensions: int | None = None,
                 asymmetric: bool = False):
        self.inner, self.cache = inner, cache
        self.provider, self.model, self.dimensions, self.asymmetric = provider, model, dimensions, asymmetric

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        import numpy as np  # (at the first embedding: off a start's path)

        keys = [cache_key(self.provider, self.model, self.dimensions, t) for t in texts]
        found = {k: np.frombuffer(v, dtype=np.float32).tolist() for k, v in self.cache.get_many(keys).items()}
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        metrics.cache_lookups(len(keys), sum(k in found for k in keys))
        if missing:
            text_of = dict(zip(keys, texts))
            vectors = [np.asarray(v, dtype=np.float32) for v in self.inner.embed_documents([text_of[k] for k in missing])]
            self.cache.put_many((k, v.tobytes()) for k, v in zip(missing, vectors))
            # Hand out float32-rounded vectors on a miss too, so a hit and a miss agree exactly.
            found.update({k: v.tolist() for k, v in zip(missing, vectors)})
        return [found[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        if not self.asymmetric:
            return self.embed_documents([text])[0]
        import numpy as np

        key = cache_key(self.provider, self.model, self.dimensions, "\0query\0" + text)
        found = self.cache.get_many([key]).get(key)
        metrics.cache_lookups(1, int(found is not None))
        if found is not None:
            return np.frombuffer(found, dtype=np.float32).tolist()
        vector = np.asarray(self.inner.embed_query(text), dtype=np.float32)
        self.cache.put_many([(key, vector.tobytes())])
        return vector.tolist()
