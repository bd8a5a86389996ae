"""A knowledge base's rows in memory: ids, unit vectors and filter columns, written in place.

The in-memory store keeps its data here; the sqlite store keeps a copy of its vectors here as
a search cache that its own writes update. A write costs what it writes: an upsert marks the
old row of an id dead and appends the new one (capacity doubles, so appends are amortised
O(1)); deletes only mark. Dead rows are compacted away once they are a third of the table.

Searches are exact (a matrix-vector product over the live rows) or, with ``index="hnsw"`` (or
``"auto"`` from ``AUTO_HNSW_FROM`` live rows on), walk an HNSW graph (eddi_rag.stores.embedded.ann) built at
the first search that needs it. A filter is answered
exactly: by the exact scan when it selects few rows, else inside the graph walk with the exact
scan as fallback when the walk finds fewer than k. A selective filter asked again (a reader's ACL) is searched in a
copy of its rows instead: exactly, and through a small graph of its own once it is large (built in the background,
one at a time; the exact copy answers meanwhile). Once the graph is built it holds the only copy of
the vectors (faiss's own storage, which the exact scan reads too): rows appended go straight into it,
and a compaction takes them back into a matrix until the graph is built again.

A graph can also be a *mapped base* (a file the sqlite store saved, its vectors the file's pages, shared by every
process that maps it): it holds the first rows and is never added to; the rows appended after it are kept in a delta
matrix beside it, searched exactly and merged with what the graph finds, until the store saves a new base holding
them (``rebase``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from eddi_rag.stores import filters
from eddi_rag.stores.embedded.ann import Hnsw
from eddi_rag.stores.embedded.masks import MetadataColumns
from eddi_rag.stores.toolkit import check_dimension, top_k

INDEXES = ("exact", "hnsw", "auto")
AUTO_HNSW_FROM = 10_000  # live rows from which ``auto`` searches the graph (384-d: exact 0.17 ms at 5k, 0.35 ms at 10k; HNSW about 0.2)
EXACT_BELOW = 2_000  # fewer candidate rows (after the filter) are answered by the exact scan
# A selective filter asked again (a reader's ACL, a user's private chunks): its rows' vectors copied contiguous once and
# searched exactly; 10,000 of 100,000 rows then cost 0.4 ms against 5 ms for the graph walked wide enough for them.
SUBSETS_BYTES = 256 * 2**20  # the copies kept, least recently used dropped first
# A copy this large (of a table searched through its graph) gets a graph of its own: 10,194 rows of 384 floats are 16 MB
# read by each exact search, 2 to 2.5 ms through Search.run at 100k chunks, against 0.3 ms for a graph of them (built in
# about a second); below, the exact scan, as for any filter selecting so few.
SUBSET_GRAPH_FROM = EXACT_BELOW
_BUILDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eddi-rag-subset-graph")  # one build at a time


@dataclass(eq=False)
class _Subset:
    """The rows a selective filter selects, at one version of the table, and what is kept to search them."""

    version: int
    rows: np.ndarray
    vectors: np.ndarray | None = None  # their vectors, contiguous: from the second time the filter is asked
    graph: Hnsw | None = None  # their own HNSW graph (row i of it is rows[i]), once built
    building: Future | None = None


class _IdsOf(Sequence):
    """The ids of ``rows``, read one at a time (top_k asks for those of the rows tied at its cut only)."""

    def __init__(self, ids: list[str | None], rows: np.ndarray):
        self.ids, self.rows = ids, rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i):  # (an index only)
        return self.ids[self.rows[i]]


class RowTable:
    def __init__(self, index: str = "exact", ef_search: int | None = None):
        if index not in INDEXES:
            raise ValueError(f"index: {index!r} is not one of {', '.join(INDEXES)}")
        self.index, self.ef_search = index, ef_search
        self.lock = threading.RLock()
        self.ids: list[str | None] = []  # row -> id; None once the row is dead
        self.row_of: dict[str, int] = {}  # id -> its live row
        self.payload: list[Any] = []  # row -> what the owner keeps with it (text, metadata)
        self.columns = MetadataColumns()
        self._matrix: np.ndarray | None = None  # (capacity, dim) float32 unit rows; None while the graph holds them
        self._delta: np.ndarray | None = None  # the vectors of the rows after a mapped graph's (capacity, dim)
        self.epoch = 0  # bumped whenever rows are renumbered or replaced: a base saved before cannot be taken
        self._alive = np.zeros(0, dtype=bool)
        self.n = 0  # rows used, dead ones included
        self.dead = 0
        self.version = 0  # bumped by every write
        self.hnsw: Hnsw | None = None
        self._live_bits: tuple[int, np.ndarray] | None = None  # (version, bitmap of the live rows)
        self._subsets: OrderedDict[int, _Subset] = OrderedDict()

    # -- shape ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.row_of)

    @property
    def dim(self) -> int | None:
        if self._matrix is not None:
            return int(self._matrix.shape[1])
        return int(self.hnsw.index.d) if self.hnsw is not None and self.n else None

    @property
    def base(self) -> int:
        """How many rows a mapped graph holds the vectors of (0 without one)."""
        return self.hnsw.size if self.hnsw is not None and self.hnsw.mapped else 0

    def delta_rows(self) -> int:
        """Rows written after the mapped graph's (0 without one)."""
        return self.n - self.base if self._delta is not None else 0

    def delta(self) -> np.ndarray:
        """The vectors of the rows after the mapped graph's, copied."""
        return np.zeros((0, 0), dtype=np.float32) if self._delta is None else self._delta[: self.delta_rows()].copy()

    @property
    def vectors(self) -> np.ndarray:
        """Every row's vector (a copy when a mapped graph holds the first: prefer ``_take``)."""
        if self._matrix is not None:
            return self._matrix[: self.n]
        if self._delta is not None:
            return np.concatenate([self.hnsw.vectors(), self._delta[: self.delta_rows()]])  # type: ignore[union-attr]
        return self.hnsw.vectors()[: self.n] if self.hnsw is not None else np.zeros((0, 0), dtype=np.float32)

    def _take(self, rows: np.ndarray) -> np.ndarray:
        """The vectors of ``rows`` (row numbers, any order), copied."""
        if self._delta is None:
            return self.vectors[rows]
        base = self.base
        low = rows < base
        taken = np.empty((len(rows), self._delta.shape[1]), dtype=np.float32)
        taken[low] = self.hnsw.vectors()[rows[low]]  # type: ignore[union-attr]
        taken[~low] = self._delta[rows[~low] - base]
        return taken

    def _products(self, q: np.ndarray) -> np.ndarray:
        """Every row's inner product with ``q`` (a new array)."""
        if self._delta is None:
            return self.vectors @ q
        return np.concatenate([self.hnsw.vectors() @ q, self._delta[: self.delta_rows()] @ q])  # type: ignore[union-attr]

    @property
    def alive(self) -> np.ndarray:
        return self._alive[: self.n]

    def nbytes(self) -> int:
        return 0 if self.dim is None else self.n * self.dim * 4

    # -- writes ---------------------------------------------------------------------------
    def add(self, ids: Sequence[str], matrix: np.ndarray, metadata: Sequence[dict[str, Any]],
            payload: Sequence[Any] | None = None) -> None:
        """Append rows (unit vectors); an id already present loses its old row; within one call
        the last occurrence of an id wins."""
        if not len(ids):
            return
        check_dimension(self.dim, matrix.shape[1], "")
        last = {id: i for i, id in enumerate(ids)}
        order = sorted(last.values()) if len(last) < len(ids) else range(len(ids))
        self.remove(self.row_of[id] for id in last if id in self.row_of)
        count = len(order)
        added = matrix[list(order)] if count < len(ids) else matrix
        self._reserve(self.n + count, matrix.shape[1])
        rows = range(self.n, self.n + count)
        if self._matrix is not None:
            self._matrix[self.n : self.n + count] = added
        elif self._delta is not None:  # after a mapped graph's rows
            self._delta[self.n - self.base : self.n - self.base + count] = added
        else:  # the graph holds the vectors: they go into it now, so searches stay steady
            assert self.hnsw is not None and self.hnsw.size == self.n
            self.hnsw.append(added)
        self._alive[self.n : self.n + count] = True
        for row, i in zip(rows, order):
            self.row_of[ids[i]] = row
            self.ids.append(ids[i])
            self.payload.append(None if payload is None else payload[i])
        self.columns.append([metadata[i] for i in order])
        self.n += count
        self.version += 1

    def _reserve(self, n: int, dim: int) -> None:
        """Room for ``n`` rows: in the alive flags, and in the matrix (or the delta after a mapped graph) unless the
        graph holds the vectors (capacities double)."""
        if n > len(self._alive):
            alive = np.zeros(max(n, 2 * len(self._alive), 1024), dtype=bool)
            alive[: self.n] = self.alive
            self._alive = alive
        if self._delta is not None:
            self._delta = _grown(self._delta, n - self.base, self.delta_rows())
        elif self._matrix is not None or self.hnsw is None or self.n == 0:
            self._matrix = _grown(self._matrix if self._matrix is not None else np.empty((0, dim), dtype=np.float32), n, self.n)

    def remove(self, rows: Iterable[int]) -> int:
        removed = 0
        for row in rows:
            id = self.ids[row]
            if self._alive[row] and id is not None:
                self._alive[row] = False
                del self.row_of[id]
                self.ids[row] = None
                self.payload[row] = None
                removed += 1
        if removed:
            self.dead += removed
            self.version += 1
            if self.dead > 1000 and 3 * self.dead > self.n:
                self.compact()
        return removed

    def clear(self) -> None:
        """No rows; the same lock (a reload runs under it: a new one let the other half of a hybrid search, waiting on
        the old, read the table half restored: "row 0 is dead")."""
        lock, epoch = self.lock, self.epoch
        RowTable.__init__(self, self.index, self.ef_search)
        self.lock, self.epoch = lock, epoch + 1

    def compact(self) -> None:
        """Drop dead rows (renumbering the rest); the HNSW graph is rebuilt at its next search (until then the
        vectors are back in a matrix)."""
        keep = np.flatnonzero(self.alive)
        self._matrix = self._take(keep) if len(keep) else None  # (a copy, out of the graph)
        self._delta = None
        self.epoch += 1
        self._alive = np.ones(len(keep), dtype=bool)
        self.ids = [self.ids[i] for i in keep]
        self.payload = [self.payload[i] for i in keep]
        self.row_of = {id: row for row, id in enumerate(self.ids) if id is not None}
        self.columns.take(keep)
        self.n, self.dead, self.hnsw = len(keep), 0, None
        self.version += 1

    def restore(self, ids: Sequence[str | None], matrix: np.ndarray, metadata: Sequence[dict[str, Any]],
                base: Hnsw | None = None) -> None:
        """Fill the table with rows in a given order, dead ones (id None) included: how a persisted HNSW graph gets
        back the row numbers its labels are. ``base``: a mapped graph holding the vectors of the first rows (then
        ``matrix`` holds those of the rows after them)."""
        self.clear()
        if base is not None:
            if not base.mapped or base.size > len(ids) or len(matrix) != len(ids) - base.size:
                raise ValueError(f"a base of {base.size} rows and {len(matrix)} more do not make {len(ids)} rows")
            self.hnsw = base
            self._delta = _grown(np.empty((0, base.index.d), dtype=np.float32), len(matrix), 0)
            self._delta[: len(matrix)] = matrix
        else:
            self._matrix = np.ascontiguousarray(matrix, dtype=np.float32) if len(ids) else None
        self._alive = np.array([id is not None for id in ids], dtype=bool)
        self.ids = list(ids)
        self.payload = [None] * len(ids)
        self.row_of = {id: row for row, id in enumerate(ids) if id is not None}
        self.columns.append(metadata)
        self.n, self.dead = len(ids), len(ids) - len(self.row_of)

    # -- reads ----------------------------------------------------------------------------
    def select(self, node: filters.Node | None) -> np.ndarray | None:
        """Rows that are live and match ``node``, as a bool mask; None: every row."""
        narrowed = None if node is None else self._narrowed(node)
        if narrowed is None:
            return self._scanned(node)
        mask = np.zeros(self.n, dtype=bool)
        mask[narrowed] = True
        return mask

    def rows(self, node: filters.Node | None) -> np.ndarray:
        """The live rows matching ``node``, ascending."""
        narrowed = None if node is None else self._narrowed(node)
        if narrowed is not None:
            return narrowed
        mask = self._scanned(node)
        return np.arange(self.n) if mask is None else np.flatnonzero(mask)

    def _scanned(self, node: filters.Node | None) -> np.ndarray | None:
        """``select`` by one pass over the filter columns."""
        if node is None:
            return self.alive.copy() if self.dead else None
        mask = self.columns.mask(node)
        return mask & self.alive if self.dead else mask

    def _narrowed(self, node: filters.Node) -> np.ndarray | None:
        """The live rows matching ``node`` when a string equality in it names few enough rows to test one by one
        (a document's chunks, a user's); None when it has none."""
        candidates = self.columns.narrow(node)
        if candidates is None or 4 * len(candidates) > self.n:  # most rows: one pass over the columns is cheaper
            return None
        keep = self.columns.mask(node, candidates)
        if self.dead:
            keep &= self._alive[candidates]
        return candidates[keep]

    def id_of(self, row: int) -> str:
        """The id of a live row (search and select return live rows only)."""
        id = self.ids[row]
        if id is None:
            raise LookupError(f"row {row} is dead")
        return id

    def rebase(self, graph: Hnsw, epoch: int) -> bool:
        """Take a mapped graph of this table's first ``graph.size`` rows, saved from it at ``epoch``: their vectors are
        the file's pages from now on, the rows after them in the delta. False (nothing changed) when the rows were
        renumbered since."""
        if epoch != self.epoch or not graph.mapped or graph.size > self.n:
            return False
        rest = self._take(np.arange(graph.size, self.n))
        self.hnsw, self._matrix = graph, None
        self._delta = _grown(np.empty((0, rest.shape[1]), dtype=np.float32), len(rest), 0)
        self._delta[: len(rest)] = rest
        self._subsets.clear()  # (their graphs were built from the rows' old copies: made again when asked)
        return True

    def take(self, other: RowTable) -> None:
        """Become ``other`` (a table read afresh), keeping this one's lock; a base saved from this one before cannot
        be taken after."""
        lock, epoch, version = self.lock, self.epoch, self.version
        self.__dict__.update(other.__dict__)
        self.lock, self.epoch, self.version = lock, max(epoch, other.epoch) + 1, max(version, other.version) + 1

    def uses_hnsw(self) -> bool:
        return self.index == "hnsw" or (self.index == "auto" and len(self) >= AUTO_HNSW_FROM)

    def graph(self) -> Hnsw:
        """The HNSW index, built over every row the first time (it then holds their vectors; later rows go into
        it as they are added)."""
        if self.hnsw is None:
            assert self.dim is not None  # called with rows only
            self.hnsw = Hnsw(self.dim, self.ef_search)
            self.hnsw.append(self.vectors)
            self._matrix = None  # one copy of the vectors: the graph's
        self.hnsw.chosen_ef = self.ef_search  # the configuration may have changed since the build
        return self.hnsw

    def _bits(self, node: filters.Node | None, mask: np.ndarray) -> np.ndarray:
        if node is not None:
            return Hnsw.bitmap(mask)
        if self._live_bits is None or self._live_bits[0] != self.version:
            self._live_bits = (self.version, Hnsw.bitmap(mask))
        return self._live_bits[1]

    def search(self, q: np.ndarray, k: int, node: filters.Node | None = None) -> list[tuple[int, float]]:
        """(row, similarity) of the k best live rows matching ``node``, similarity descending,
        ties broken by id."""
        if self.dim is None or k <= 0 or not len(self):
            return []
        rows = None if node is None else self._narrowed(node)  # (a reader's ACL: its rows, without a mask of all)
        mask: np.ndarray | None = None
        if rows is None:
            mask = self._scanned(node)
            selected = self.n if mask is None else int(mask.sum())
            if mask is not None and selected * 4 < self.n:
                rows = np.flatnonzero(mask)
        else:
            selected = len(rows)
        if not selected:
            return []
        if rows is not None and selected * 4 < self.n and (subset := self._subset(rows)) is not None:
            return self._search_subset(subset, q, k)
        if rows is not None and mask is None:
            mask = np.zeros(self.n, dtype=bool)
            mask[rows] = True
        if self.uses_hnsw() and selected >= EXACT_BELOW:
            fetch = min(selected, k + 5)  # more than k, so ties at the cut are broken by id
            found = self.graph().search(q, fetch, None if mask is None else self._bits(node, mask), selected / self.n)
            if self.delta_rows():
                found = sorted(found + self._delta_best(q, fetch, mask), key=lambda rs: -rs[1])
            if len(found) >= min(k, selected):
                return self._cut(found, k)
        return self._exact(q, k, mask, selected)

    def _delta_best(self, q: np.ndarray, k: int, mask: np.ndarray | None) -> list[tuple[int, float]]:
        """(row, similarity) of up to ``k`` of the rows after a mapped graph's (allowed by ``mask``), searched exactly."""
        base, count = self.base, self.delta_rows()
        sims = self._delta[:count] @ q  # type: ignore[index]
        if mask is not None:
            sims[~mask[base : base + count]] = -np.inf
        best = np.argpartition(-sims, k)[:k] if k < count else np.arange(count)
        return [(base + int(i), float(sims[i])) for i in best if sims[i] > -np.inf]

    def _search_subset(self, subset: _Subset, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        rows, graph, vectors = subset.rows, subset.graph, subset.vectors
        if graph is not None:
            found = graph.search(q, min(len(rows), k + 5))
            if len(found) >= min(k, len(rows)):
                return self._cut([(int(rows[i]), s) for i, s in found], k)
        assert vectors is not None
        sims = vectors @ q
        return [(int(rows[i]), float(sims[i])) for i in top_k(sims, _IdsOf(self.ids, rows), k)]

    def _subset(self, rows: np.ndarray) -> _Subset | None:
        """What is kept for a selective filter's ``rows`` (ascending) seen before at this version: the first sight only
        remembers them (a filter asked once is searched as before), the second copies their vectors, the third of many
        starts building their graph; None until the copy is made."""
        key = hash(rows.tobytes())
        with self.lock:
            known = self._subsets.get(key)
            if known is None or known.version != self.version or not np.array_equal(known.rows, rows):
                self._subsets[key] = _Subset(self.version, rows)
                self._subsets.move_to_end(key)
                self._forget_past_budget()
                return None
            self._subsets.move_to_end(key)
            if known.vectors is None:
                known.vectors = self._take(rows)
                self._forget_past_budget()
            elif known.building is None and len(rows) >= SUBSET_GRAPH_FROM and self.uses_hnsw():
                known.building = _BUILDER.submit(self._build_graph, known)
            return known

    def _build_graph(self, subset: _Subset) -> None:
        vectors = subset.vectors
        assert vectors is not None
        graph = Hnsw(vectors.shape[1], self.ef_search)
        graph.append(vectors)
        with self.lock:
            subset.graph, subset.vectors = graph, graph.vectors()  # one copy of the vectors: the graph's

    def _forget_past_budget(self) -> None:
        kept = 0
        for newer, key in enumerate(reversed(list(self._subsets))):  # newest first: the oldest go past the budget
            subset = self._subsets[key]
            kept += 0 if subset.vectors is None else subset.vectors.nbytes
            if subset.version != self.version or kept > SUBSETS_BYTES or newer >= 256:
                del self._subsets[key]

    def settle(self, timeout: float | None = None) -> None:
        """Wait for the graphs of selective filters being built (a benchmark's warm-up; a test)."""
        with self.lock:
            building = [s.building for s in self._subsets.values() if s.building is not None]
        wait(building, timeout)

    def _cut(self, found: list[tuple[int, float]], k: int) -> list[tuple[int, float]]:
        """The first k of (row, similarity) pairs sorted by similarity, ties at the cut by id."""
        end = k
        while end < len(found) and found[end][1] == found[k - 1][1]:
            end += 1
        if end == k and all(found[i][1] > found[i + 1][1] for i in range(min(k, len(found)) - 1)):
            return found[:k]
        return sorted(found[:end], key=lambda rs: (-rs[1], self.ids[rs[0]] or ""))[:k]

    def similarities(self, q: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """The cosine of each of ``ids`` that is a live row to the unit vector ``q``."""
        found = [(id, self.row_of[id]) for id in ids if id in self.row_of]
        sims = self._take(np.array([r for _, r in found], dtype=np.int64)) @ q if found else []
        return {id: float(s) for (id, _), s in zip(found, sims)}

    def _exact(self, q: np.ndarray, k: int, mask: np.ndarray | None, selected: int) -> list[tuple[int, float]]:
        if mask is not None and selected * 4 < self.n:  # few rows: multiply only those
            rows = np.flatnonzero(mask)
            sims = self._take(rows) @ q
            return [(int(rows[i]), float(sims[i])) for i in top_k(sims, _IdsOf(self.ids, rows), k)]
        sims = self._products(q)
        if mask is not None:  # most rows: the full product, the others pushed to the bottom
            sims[~mask] = -np.inf
        return [(i, float(sims[i])) for i in top_k(sims, self.ids, min(k, selected))]


def _grown(matrix: np.ndarray, n: int, used: int) -> np.ndarray:
    """``matrix`` with room for ``n`` rows (the first ``used`` kept; its capacity doubled when it has to grow)."""
    if n <= len(matrix):
        return matrix
    grown = np.empty((max(n, 2 * len(matrix), 1024), matrix.shape[1]), dtype=np.float32)
    grown[:used] = matrix[:used]
    return grown
