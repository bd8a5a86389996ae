"""An HNSW index over a row table's vectors (faiss ``IndexHNSWFlat``, inner product on unit vectors).

Labels are the table's row numbers: the index holds every row ever appended, dead ones
included, and a search passes the rows it may return (live, and matching the filter) as a
bitmap that faiss checks inside the graph walk. Adding rows is incremental (``append``); deleting
needs nothing here; the table rebuilds the index only when it compacts.

A graph saved to a file can be loaded *mapped*: its vectors are then the file's pages (faiss's ``IO_FLAG_MMAP_IFC``),
shared by every process mapping the same file, and it is never added to (faiss aborts the process on an ``add`` to a
mapped index, so ``append`` refuses instead); the table keeps the rows written after it beside it.

faiss-cpu was chosen by measuring (100k × 384 clustered, one core, top-5): faiss HNSW M=16
0.19 ms at recall@10 1.000, usearch 0.30 ms, hnswlib 0.14 ms (unmaintained since 2023);
faiss also filters inside the graph walk, which neither of the others offers from Python.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import faiss
import numpy as np

M = 16  # graph degree
EF_CONSTRUCTION = 100
EF_SEARCH = 64  # search breadth up to 100,000 rows; wider above (default_ef)
MAX_EF = 1024


def default_ef(rows: int) -> int:
    """The search breadth keeping recall@10 at 0.99 or more as the graph grows (384-d clustered,
    M 16; benchmarks/README.md): 64 up to 100,000 rows (recall 1.000), then ×3 per decade of rows
    (192 at 1M: 0.996, where 64 gives 0.976 and 128 gives 0.985)."""
    return EF_SEARCH if rows <= 100_000 else min(MAX_EF, round(EF_SEARCH * 3 ** math.log10(rows / 100_000)))


class Hnsw:
    def __init__(self, dim: int, ef_search: int | None = None, index: faiss.Index | None = None, mapped: bool = False):
        self.chosen_ef = ef_search  # None: default_ef of the graph's size
        if index is None:
            index = faiss.IndexHNSWFlat(dim, M, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = EF_CONSTRUCTION
        self.index = index
        self.mapped = mapped  # its vectors are a file's pages: read-only
        self.path: Path | None = None  # the file it was loaded from

    @property
    def size(self) -> int:
        return int(self.index.ntotal)

    @property
    def ef_search(self) -> int:
        return self.chosen_ef or default_ef(self.size)

    def append(self, vectors: np.ndarray) -> None:
        """Add rows after the last."""
        if self.mapped:
            raise ValueError("a mapped graph is read-only")  # (faiss would abort the process)
        if len(vectors):
            self.index.add(np.ascontiguousarray(vectors, dtype=np.float32))

    def vectors(self) -> np.ndarray:
        """Every row's vector, as the graph stores it: a view of its storage (no copy; valid until the next add)."""
        storage = faiss.downcast_index(self.index.storage)  # type: ignore[attr-defined]  # IndexHNSWFlat's IndexFlat
        if not self.size:
            return np.zeros((0, self.index.d), dtype=np.float32)
        xb = storage.get_xb()  # type: ignore[attr-defined]  # (IndexFlat's, not in faiss's stubs)
        view = faiss.rev_swig_ptr(xb, self.size * self.index.d).reshape(self.size, self.index.d)
        view.flags.writeable = not self.mapped
        return view

    def search(self, q: np.ndarray, k: int, allowed: np.ndarray | None = None, fraction: float = 1.0) -> list[tuple[int, float]]:
        """(row, similarity) of up to ``k`` rows; ``allowed`` (a bitmap of the rows that may be
        returned, ``bitmap()``'s, or None for all) restricts them; ``fraction`` (how many rows are
        allowed) widens the walk for a selective filter so it still finds k."""
        ef = min(MAX_EF, max(self.ef_search, k, int(self.ef_search / max(fraction, 1e-6))))
        if allowed is None and ef == self.ef_search:
            self.index.hnsw.efSearch = ef  # type: ignore[attr-defined]  # the common case, without building search parameters
            sims, labels = self.index.search(q[None, :], k)
        else:
            params = faiss.SearchParametersHNSW()  # type: ignore[attr-defined]  # in faiss, not in its stubs
            params.efSearch = ef
            if allowed is not None:
                params.sel = faiss.IDSelectorBitmap(len(allowed), faiss.swig_ptr(allowed))
            sims, labels = self.index.search(q[None, :], k, params=params)
        return [(r, s) for r, s in zip(labels[0].tolist(), sims[0].tolist()) if r >= 0]

    @staticmethod
    def bitmap(mask: np.ndarray) -> np.ndarray:
        """A bool per row as the bitmap faiss reads (row r is bit r % 8 of byte r // 8)."""
        return np.packbits(mask, bitorder="little")

    def save(self, path: Path) -> None:
        """Write the graph to ``path`` whole or not at all (a file of its own first, renamed: a process mapping the
        file ``path`` named before keeps its pages)."""
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        faiss.write_index(self.index, str(tmp))
        tmp.replace(path)

    @classmethod
    def load(cls, path: Path, ef_search: int | None = None, mapped: bool = False) -> Hnsw:
        """A saved graph; ``mapped``: its vectors left in the file (shared, read-only), else read into memory."""
        graph = cls(0, ef_search, faiss.read_index(str(path), faiss.IO_FLAG_MMAP_IFC if mapped else 0), mapped)
        graph.path = path
        return graph
