"""What backends share to keep the KnowledgeStore protocol (``stores/base.py``) with little code of their own:
exact filters on engines that coerce types (``typed_fields``), ``replace`` for engines without transactions
(``OverwriteThenPrune``), over-fetching past a post-filter, engine-safe names, parameter schemas, and the
vector checks every ``upsert`` and ``search`` makes. A backend may use any of it; the protocol needs none."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from eddi_rag.stores import filters
from eddi_rag.stores.base import Chunk, DimensionMismatchError, SearchHit

TYPED_FIELDS = {"string": "m_str", "number": "m_num", "bool": "m_bool"}


def typed_fields(metadata: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Scalar metadata split by type ({"m_str": {...}, "m_num": {...}, "m_bool": {...}}), so an
    engine that coerces types ("3" == 3) or mixes them in one index still filters exactly."""
    out: dict[str, dict[str, Any]] = {prefix: {} for prefix in TYPED_FIELDS.values()}
    for key, value in metadata.items():
        kind = filters.value_kind(value)
        if kind is not None:
            out[TYPED_FIELDS[kind]][key] = value
    return out


def string_lists(metadata: dict[str, Any]) -> dict[str, list[str]]:
    """The strings of each list-valued field (a document's ``acl``), for an engine's array field that answers
    ``$containsAny`` / ``$containsNone``; kept apart from the scalar fields, so the scalar operators never see a list."""
    return {k: [e for e in v if isinstance(e, str)] for k, v in metadata.items() if isinstance(v, list)}


class OverwriteThenPrune:
    """``replace`` for engines without transactions: validate everything first, write the new
    chunks (overwriting equal ids), then delete the old ones that were not overwritten. A
    failure before the write changes nothing; a failure after it leaves old and new side by side.
    Users implement ``_dimension``, ``_ids_matching``, ``_write`` and ``_delete_ids``."""

    kb_id: str

    def _dimension(self) -> int | None:
        raise NotImplementedError

    def _ids_matching(self, where: filters.Where) -> list[str]:
        raise NotImplementedError

    def _write(self, chunks: Sequence[Chunk]) -> None:
        raise NotImplementedError

    def _delete_ids(self, ids: list[str]) -> None:
        raise NotImplementedError

    def replace(self, where: filters.Where, chunks: Sequence[Chunk]) -> None:
        filters.node(where)
        if chunks:
            check_dimension(self._dimension(), check_vectors(chunks).shape[1], self.kb_id)
        old = self._ids_matching(where)
        if chunks:
            self._write(chunks)
        keep = {c.id for c in chunks}
        self._delete_ids([i for i in old if i not in keep])


def overfetch(search: Callable[[int], list[SearchHit]], k: int, available: int, first: int | None = None) -> list[SearchHit]:
    """The best k of ``search(n)``, asking for n > k candidates (so ties at the cut are broken by
    id, and a filter applied after the engine's search still leaves k), tripling n until more than
    k come back or all ``available`` candidates were asked for."""
    n = min(available, 2 * k + 10 if first is None else first)
    while True:
        hits = search(max(n, 1))
        if len(hits) > k or n >= available:
            return sorted(hits, key=lambda h: (-h.similarity, h.id))[:k]
        n = min(available, n * 3)


def engine_name(kb_id: str, allowed: str = "A-Za-z0-9_-", *, prefix: str = "eddi_kb_", lower: bool = False,
                max_length: int = 255) -> str:
    """The one way a KB id becomes an engine's collection/table/index name: ``prefix`` + the id,
    characters outside ``allowed`` (a regex character class body) as ``_``, lower-cased when the
    engine folds case. When that changed the id or the name is too long, a hash of the id is
    appended (within ``max_length``), so two ids never share a name ("a-b" and "a_b" stay apart)."""
    cleaned = re.sub(f"[^{allowed}]", "_", kb_id.lower() if lower else kb_id)
    name = prefix + cleaned
    if cleaned == kb_id and len(name) <= max_length:
        return name
    digest = "_" + hashlib.sha256(kb_id.encode()).hexdigest()[:10]
    return name[: max_length - len(digest)] + digest


def parameters_schema(properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    """The JSON Schema of a backend's storeParameters: unknown keys are errors."""
    return {"type": "object", "properties": properties, "required": list(required), "additionalProperties": False, **extra}


def normalise(vectors: Any) -> np.ndarray:
    """Rows as contiguous float32 unit vectors."""
    m = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if m.ndim == 1:
        m = m[None, :]
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms == 0, 1.0, norms)


def top_k(similarities: np.ndarray, ids: Sequence[str | None], k: int) -> list[int]:
    """Indices of the k best rows, by similarity descending, ties broken by id ascending (a
    dead row's id is None)."""
    n = len(similarities)
    if n == 0 or k <= 0:
        return []
    if k < n:
        kth = np.partition(similarities, n - k)[n - k]
        candidates = np.flatnonzero(similarities >= kth)
    else:
        candidates = np.arange(n)
    return sorted(candidates.tolist(), key=lambda i: (-float(similarities[i]), ids[i] or ""))[:k]


def query_vector(vector: Sequence[float], dim: int | None, k: int, kb_id: str) -> np.ndarray | None:
    """The query as a unit float32 vector checked against the KB's dimension; None when there is
    nothing to search (an empty KB, or k <= 0)."""
    if dim is None or k <= 0:
        return None
    q = np.array(vector, dtype=np.float32).reshape(-1)
    check_dimension(dim, q.shape[0], kb_id)
    norm = float(np.sqrt(q @ q))
    return q / norm if norm else q


def check_vectors(chunks: Sequence[Chunk]) -> np.ndarray:
    if any(c.vector is None for c in chunks):
        missing = next(c.id for c in chunks if c.vector is None)
        raise ValueError(f"chunk {missing!r} has no vector")
    matrix = normalise([c.vector for c in chunks])
    return matrix


def check_dimension(expected: int | None, got: int, kb: str) -> None:
    if expected is not None and expected != got:
        raise DimensionMismatchError(
            f"knowledge base {kb!r} holds {expected}-dimensional vectors, got {got}: "
            "the embedding model changed; re-embed all (POST .../reembed, or Re-embed all on its Documents page) "
            "or use the matching model"
        )
