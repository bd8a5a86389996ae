"""A persistent embedding cache keyed by SHA-256 of (provider, model, dimensions, text).

Wraps any LangChain ``Embeddings``: only texts not seen before reach the provider, so
re-ingesting unchanged text costs no provider call.
"""

from __future__ import annotations

import hashlib

import numpy as np
from langchain_core.embeddings import Embeddings

from eddi_rag.db import Database

_SCHEMA = "CREATE TABLE IF NOT EXISTS embedding_cache (key TEXT PRIMARY KEY, vector BLOB NOT NULL)"


def cache_key(provider: str, model: str, dimensions: int | None, text: str) -> str:
    h = hashlib.sha256()
    for part in (provider, model, str(dimensions or ""), text):
        h.update(part.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


class CachedEmbeddings(Embeddings):
    def __init__(self, inner: Embeddings, db: Database, provider: str, model: str, dimensions: int | None = None):
        self.inner, self.db = inner, db
        self.provider, self.model, self.dimensions = provider, model, dimensions
        db.execute(_SCHEMA)

    def _key(self, text: str) -> str:
        return cache_key(self.provider, self.model, self.dimensions, text)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        keys = [self._key(t) for t in texts]
        found: dict[str, list[float]] = {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            rows = self.db.query(
                f"SELECT key, vector FROM embedding_cache WHERE key IN ({','.join('?' * len(part))})", part
            )
            found.update({r["key"]: np.frombuffer(r["vector"], dtype=np.float32).tolist() for r in rows})
        missing = list(dict.fromkeys(k for k in keys if k not in found))
        if missing:
            text_of = dict(zip(keys, texts))
            vectors = self.inner.embed_documents([text_of[k] for k in missing])
            with self.db.transaction() as c:
                c.executemany(
                    "INSERT OR REPLACE INTO embedding_cache VALUES (?, ?)",
                    [(k, np.asarray(v, dtype=np.float32).tobytes()) for k, v in zip(missing, vectors)],
                )
            # Hand out float32-rounded vectors on a miss too, so a hit and a miss agree exactly.
            found.update({k: np.asarray(v, dtype=np.float32).tolist() for k, v in zip(missing, vectors)})
        return [found[k] for k in keys]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]
