"""A filter AST evaluated over many rows at once, as a numpy boolean mask.

Same meaning as the reference :func:`eddi_rag.stores.filters.matches` (the conformance suite's
property test checks it through the in-memory and sqlite stores): values compare only with values
of the same kind, a missing field matches only ``$ne``/``$nin``.

Columns grow with the rows (appending costs what the appended rows cost, never a rebuild), one
per field, each two arrays: the value's kind and the value as a float64, where a string is its
code in the column's dictionary, so equality on strings is an integer comparison and an ordered
comparison on strings is decided once per distinct string.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eddi_rag.stores.filters import And, Compare, Node, Or, scalar_kind, value_kind

_CODES = {"bool": 1, "number": 2, "string": 3}  # 0: missing or another type


class _Column:
    def __init__(self, capacity: int):
        self.kind = np.zeros(capacity, dtype=np.int8)
        self.value = np.zeros(capacity, dtype=np.float64)
        self.codes: dict[str, int] = {}  # string -> code
        self.strings: list[str] = []  # code -> string

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

    def equals(self, v: Any, n: int) -> np.ndarray:
        code = self.encode(v)
        if code is None:
            return np.zeros(n, dtype=bool)
        return (self.kind[:n] == _CODES[scalar_kind(v)]) & (self.value[:n] == code)

    def ordered(self, op: str, v: Any, n: int) -> np.ndarray:
        kind = scalar_kind(v)
        same = self.kind[:n] == _CODES[kind]
        if kind == "string":  # decide per distinct string, then look the codes up
            keep = np.array([_ORDER[op](s, v) for s in self.strings], dtype=bool)
            if not keep.any():
                return np.zeros(n, dtype=bool)
            return same & keep[np.where(same, self.value[:n], 0).astype(np.int64)]
        with np.errstate(invalid="ignore"):
            return same & _ORDER[op](self.value[:n], float(v))


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
        self.n += len(metadata)

    def take(self, rows: np.ndarray) -> None:
        """Keep only ``rows`` (ascending), renumbered from 0."""
        for column in self._columns.values():
            column.kind = column.kind[rows].copy()
            column.value = column.value[rows].copy()
        self.n = self._capacity = len(rows)

    def mask(self, node: Node | None) -> np.ndarray:
        if node is None:
            return np.ones(self.n, dtype=bool)
        if isinstance(node, (And, Or)):
            masks = [self.mask(child) for child in node.children]
            return np.logical_and.reduce(masks) if isinstance(node, And) else np.logical_or.reduce(masks)
        return self._compare(node)

    def _compare(self, c: Compare) -> np.ndarray:
        col = self._columns.get(c.field)
        if col is None:  # no row has the field: only the negations match
            return np.full(self.n, c.op in ("$ne", "$nin"), dtype=bool)
        if c.op in ("$eq", "$ne"):
            hit = col.equals(c.value, self.n)
            return hit if c.op == "$eq" else ~hit
        if c.op in ("$in", "$nin"):
            hit = np.zeros(self.n, dtype=bool)
            for v in c.value:
                hit |= col.equals(v, self.n)
            return hit if c.op == "$in" else ~hit
        return col.ordered(c.op, c.value, self.n)
