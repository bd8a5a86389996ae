"""A filter AST evaluated over many rows at once, as a numpy boolean mask.

Same meaning as the reference :func:`eddi_rag.stores.filters.matches` (the conformance suite's
property test checks it through the in-memory and sqlite stores): values compare only with values
of the same kind, a missing field matches only ``$ne``/``$nin``.

Columns grow with the rows (appending costs what the appended rows cost, never a rebuild), one
per field, each two arrays: the value's kind and the value as a float64, where a string is its
code in the column's dictionary, so equality on strings is an integer comparison and an ordered
comparison on strings is decided once per distinct string.

A list of strings (a document's ``acl``) is indexed the other way round: each string, the rows whose list holds
it, so ``$containsAny`` costs the rows it names.

A string equality (``document_id``, ``user_id``) is answered from a sorted index of its column, built at its
first use and rebuilt once the rows appended since are an eighth of it (those are scanned meanwhile): the
rest of the filter is then evaluated only on the rows it names. A knowledge base's neighbour fetch at 1M rows
costs what the document's rows cost, not three passes over a million.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from eddi_rag.stores.filters import CONTAINS, And, Compare, Node, Or, scalar_kind, value_kind

_CODES = {"bool": 1, "number": 2, "string": 3}  # 0: missing or another type


Rows = slice | np.ndarray  # rows 0..n-1, or some of them (ascending)
STRING = _CODES["string"]
RESORT_FROM = 4096  # rows appended since the sorted index was built that are scanned rather than sorted in


class _Column:
    def __init__(self, capacity: int):
        self.kind = np.zeros(capacity, dtype=np.int8)
        self.value = np.zeros(capacity, dtype=np.float64)
        self.codes: dict[str, int] = {}  # string -> code
        self.strings: list[str] = []  # code -> string
        self._sorted: tuple[int, np.ndarray, np.ndarray] | None = None  # (rows covered, their string rows by code, the codes)

    def grow(self, capacity: int) -> None:
        for name in ("kind", "value"):
            old = getattr(self, name)
            new = np.zeros(capacity, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def set(self, row: int, v: Any) -> None:
        kind = value_kind(v)
        if kind is None:
            self.kind[row] = 0
            return
        self.kind[row] = _CODES[kind]
        if kind == "string":
            code = self.codes.get(v)
            if code is None:
                code = self.codes[v] = len(self.strings)
                self.strings.append(v)
            self.value[row] = code
        else:
            self.value[row] = float(v)

    def encode(self, v: Any) -> float | None:
        """The stored value for ``v``; None for a string no row holds."""
        if value_kind(v) == "string":
            code = self.codes.get(v)
            return None if code is None else float(code)
        return float(v)

    def equals(self, v: Any, rows: Rows, size: int) -> np.ndarray:
        code = self.encode(v)
        if code is None:
            return np.zeros(size, dtype=bool)
        return (self.kind[rows] == _CODES[scalar_kind(v)]) & (self.value[rows] == code)

    def ordered(self, op: str, v: Any, rows: Rows, size: int) -> np.ndarray:
        kind = scalar_kind(v)
        same = self.kind[rows] == _CODES[kind]
        if kind == "string":  # decide per distinct string, then look the codes up
            keep = np.array([_ORDER[op](s, v) for s in self.strings], dtype=bool)
            if not keep.any():
                return np.zeros(size, dtype=bool)
            return same & keep[np.where(same, self.value[rows], 0).astype(np.int64)]
        with np.errstate(invalid="ignore"):
            return same & _ORDER[op](self.value[rows], float(v))

    def rows_equal(self, v: str, n: int) -> np.ndarray:
        """The rows (ascending) among 0..n-1 holding the string ``v``: a binary search of the sorted index, and a
        scan of the rows appended since it was built."""
        code = self.codes.get(v)
        if code is None:
            return np.zeros(0, dtype=np.int64)
        if self._sorted is None or n - self._sorted[0] > max(RESORT_FROM, self._sorted[0] // 8):
            strings = np.flatnonzero(self.kind[:n] == STRING)
            by_code = strings[np.argsort(self.value[strings], kind="stable")]
            self._sorted = (n, by_code, self.value[by_code])
        covered, by_code, codes = self._sorted
        lo, hi = np.searchsorted(codes, code, "left"), np.searchsorted(codes, code, "right")
        tail = covered + np.flatnonzero(self.equals(v, slice(covered, n), n - covered))
        return np.concatenate((np.sort(by_code[lo:hi]), tail))


class _Lists:
    """For one field: each string some row's list holds, the rows (ascending) holding it."""

    def __init__(self) -> None:
        self.rows_of: dict[str, list[int]] = {}
        self._arrays: dict[str, np.ndarray] = {}

    def add(self, row: int, values: list[Any]) -> None:
        for v in {e for e in values if isinstance(e, str)}:
            self.rows_of.setdefault(v, []).append(row)
            self._arrays.pop(v, None)

    def rows(self, values: tuple[str, ...]) -> np.ndarray:
        """The rows (ascending, once each) whose list holds one of ``values``."""
        found = [self._array(v) for v in values if v in self.rows_of]
        if not found:
            return np.zeros(0, dtype=np.int64)
        return found[0] if len(found) == 1 else np.unique(np.concatenate(found))

    def _array(self, v: str) -> np.ndarray:
        array = self._arrays.get(v)
        if array is None:
            array = self._arrays[v] = np.asarray(self.rows_of[v], dtype=np.int64)
        return array

    def take(self, rows: np.ndarray) -> None:
        """Keep only ``rows`` (ascending), renumbered from 0."""
        kept: dict[str, list[int]] = {}
        for v, old in self.rows_of.items():
            at = np.asarray(old, dtype=np.int64)
            new = np.searchsorted(rows, at)
            hit = (new < len(rows)) & (rows[np.minimum(new, len(rows) - 1)] == at) if len(rows) else np.zeros(len(at), bool)
            if hit.any():
                kept[v] = new[hit].tolist()
        self.rows_of, self._arrays = kept, {}


_ORDER = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


class MetadataColumns:
    """Filter columns over rows 0..n-1; ``append`` adds rows, ``take`` keeps a subset (compaction)."""

    def __init__(self, metadata: Sequence[dict[str, Any]] = ()):
        self.n = 0
        self._capacity = 0
        self._columns: dict[str, _Column] = {}
        self._lists: dict[str, _Lists] = {}
        self.append(metadata)

    def _reserve(self, n: int) -> None:
        if n > self._capacity:
            self._capacity = max(n, 2 * self._capacity, 1024)
            for column in self._columns.values():
                column.grow(self._capacity)

    def append(self, metadata: Sequence[dict[str, Any]]) -> None:
        self._reserve(self.n + len(metadata))
        for row, meta in enumerate(metadata, start=self.n):
            for field, v in meta.items():
                column = self._columns.get(field)
                if column is None:
                    column = self._columns[field] = _Column(self._capacity)
                column.set(row, v)
                if isinstance(v, list):
                    self._lists.setdefault(field, _Lists()).add(row, v)
        self.n += len(metadata)

    def take(self, rows: np.ndarray) -> None:
        """Keep only ``rows`` (ascending), renumbered from 0."""
        for column in self._columns.values():
            column.kind = column.kind[rows].copy()
            column.value = column.value[rows].copy()
            column._sorted = None
        for lists in self._lists.values():
            lists.take(rows)
        self.n = self._capacity = len(rows)

    def narrow(self, node: Node | None) -> np.ndarray | None:
        """The rows (ascending) a string equality or a ``$containsAny`` of ``node`` (itself, or one its Ands require)
        allows, or an Or each of whose branches has one (several documents' chunks at once), the fewest when there are
        several; None when it has none. Only these rows can match ``node``."""
        best: np.ndarray | None = None
        for c in _required(node):
            if isinstance(c, Or):
                branches = [self.narrow(child) for child in c.children]
                if not branches or any(b is None for b in branches):
                    continue
                rows = np.unique(np.concatenate(cast(list[np.ndarray], branches)))
            elif isinstance(c, Compare) and c.op == "$containsAny":
                rows = self._holding(c)
            elif isinstance(c, Compare) and c.op == "$eq" and isinstance(c.value, str):
                col = self._columns.get(c.field)
                rows = np.zeros(0, dtype=np.int64) if col is None else col.rows_equal(c.value, self.n)
            else:
                continue
            if best is None or len(rows) < len(best):
                best = rows
        return best

    def mask(self, node: Node | None, rows: np.ndarray | None = None) -> np.ndarray:
        """Which of ``rows`` (default: every row) match ``node``, as one bool per row."""
        sel: Rows = slice(0, self.n) if rows is None else rows
        size = self.n if rows is None else len(rows)
        return self._mask(node, sel, size)

    def _mask(self, node: Node | None, rows: Rows, size: int) -> np.ndarray:
        if node is None:
            return np.ones(size, dtype=bool)
        if isinstance(node, (And, Or)):
            masks = [self._mask(child, rows, size) for child in node.children]
            return np.logical_and.reduce(masks) if isinstance(node, And) else np.logical_or.reduce(masks)
        return self._compare(node, rows, size)

    def _holding(self, c: Compare) -> np.ndarray:
        lists = self._lists.get(c.field)
        return np.zeros(0, dtype=np.int64) if lists is None else lists.rows(c.value)

    def _compare(self, c: Compare, rows: Rows, size: int) -> np.ndarray:
        if c.op in CONTAINS:
            holding = self._holding(c)
            if isinstance(rows, slice):
                hit = np.zeros(self.n, dtype=bool)
                hit[holding] = True
                hit = hit[rows]
            else:  # a few candidates (a document's chunks): looked up in the sorted rows, not a mask of every row
                at = np.minimum(np.searchsorted(holding, rows), max(len(holding) - 1, 0))
                hit = holding[at] == rows if len(holding) else np.zeros(size, dtype=bool)
            return hit if c.op == "$containsAny" else ~hit
        col = self._columns.get(c.field)
        if col is None:  # no row has the field: only the negations match
            return np.full(size, c.op in ("$ne", "$nin"), dtype=bool)
        if c.op in ("$eq", "$ne"):
            hit = col.equals(c.value, rows, size)
            return hit if c.op == "$eq" else ~hit
        if c.op in ("$in", "$nin"):
            hit = np.zeros(size, dtype=bool)
            for v in c.value:
                hit |= col.equals(v, rows, size)
            return hit if c.op == "$in" else ~hit
        return col.ordered(c.op, c.value, rows, size)


def _required(node: Node | None) -> list[Node]:
    """The conditions a row must meet for ``node``: itself, or those of each part of an And."""
    if isinstance(node, And):
        return [c for child in node.children for c in _required(child)]
    return [] if node is None else [node]
