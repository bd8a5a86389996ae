"""A filter AST evaluated over many rows at once, as a numpy boolean mask.

Same meaning as the reference :func:`eddi_rag.stores.filters.matches` (the conformance suite's
property test checks it through the in-memory and sqlite stores): values compare only with values
of the same kind, a missing field matches only ``$ne``/``$nin``. Columns are built once per field
and kept until the rows change, so a filtered search costs a few vector operations, not a Python
call per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from eddi_rag.stores.filters import And, Compare, Node, Or, value_kind

_CODES = {"bool": 1, "number": 2, "string": 3}  # 0: missing or another type


class _Column:
    def __init__(self, values: list[Any]):
        kinds = [value_kind(v) for v in values]
        self.kind = np.array([_CODES.get(k, 0) for k in kinds], dtype=np.int8)
        self.number = np.array([float(v) if k == "number" else np.nan for v, k in zip(values, kinds)], dtype=np.float64)
        self.boolean = np.array([bool(v) if k == "bool" else False for v, k in zip(values, kinds)], dtype=bool)
        self.string = np.array([v if k == "string" else "" for v, k in zip(values, kinds)], dtype=object)

    def typed(self, value: Any) -> tuple[np.ndarray, np.ndarray]:
        """(rows of the value's kind, that column's values)."""
        kind = value_kind(value)
        column = {"bool": self.boolean, "number": self.number, "string": self.string}[kind]
        return self.kind == _CODES[kind], column

    def equals(self, value: Any) -> np.ndarray:
        same, column = self.typed(value)
        return same & (column == (float(value) if value_kind(value) == "number" else value))


class MetadataColumns:
    def __init__(self, metadata: Sequence[dict[str, Any]]):
        self._metadata = metadata
        self.n = len(metadata)
        self._columns: dict[str, _Column] = {}

    def _column(self, field: str) -> _Column:
        if field not in self._columns:
            self._columns[field] = _Column([m.get(field) for m in self._metadata])
        return self._columns[field]

    def mask(self, node: Node | None) -> np.ndarray:
        if node is None:
            return np.ones(self.n, dtype=bool)
        if isinstance(node, (And, Or)):
            masks = [self.mask(child) for child in node.children]
            return np.logical_and.reduce(masks) if isinstance(node, And) else np.logical_or.reduce(masks)
        return self._compare(node)

    def _compare(self, c: Compare) -> np.ndarray:
        col = self._column(c.field)
        if c.op in ("$eq", "$ne"):
            hit = col.equals(c.value)
            return hit if c.op == "$eq" else ~hit
        if c.op in ("$in", "$nin"):
            hit = np.logical_or.reduce([col.equals(v) for v in c.value]) if c.value else np.zeros(self.n, dtype=bool)
            return hit if c.op == "$in" else ~hit
        same, column = col.typed(c.value)
        value = float(c.value) if value_kind(c.value) == "number" else c.value
        with np.errstate(invalid="ignore"):
            compared = {"$gt": column > value, "$gte": column >= value, "$lt": column < value, "$lte": column <= value}[c.op]
        return same & np.asarray(compared, dtype=bool)
