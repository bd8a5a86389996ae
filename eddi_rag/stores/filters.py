"""The one ``where`` filter language (docs/architecture.md §4), parsed once into an AST.

Chroma/Mongo style: ``{"field": value}`` (equality), ``{"field": {"$op": value}}`` with
``$eq $ne $gt $gte $lt $lte $in $nin``, several fields = implicit AND, and ``$and``/``$or``
over lists of filters; ``$containsAny`` / ``$containsNone`` ask whether a list field (a document's
``acl``) holds any of some strings. The Python predicate :func:`matches` is the reference meaning; each
backend compiles the AST in its own file and must return exactly what it returns (the
conformance suite checks).

Meaning, precisely: values compare only with values of the same type (bool, number, string);
``$gt``-style operators need a number or a string; a missing field matches only ``$ne``/``$nin``
(and ``$containsNone``). A list-valued field is no scalar to the scalar operators (it matches
``$ne``/``$nin`` as a missing one does); ``$containsAny`` matches a field holding a list with one of
its strings among the given ones, ``$containsNone`` is its exact negation (a missing field, a scalar,
a list without them).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from eddi_rag.errors import EddiRagError

COMPARISONS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$containsAny", "$containsNone")
LISTED = ("$in", "$nin", "$containsAny", "$containsNone")  # the operators taking a list of values
CONTAINS = ("$containsAny", "$containsNone")  # over a list-valued field: its strings
# What every backend executes (the conformance suite runs filters at these limits on each):
MAX_DEPTH = 16  # levels of $and / $or
MAX_VALUES = 1_000  # values in one $in / $nin
MAX_CONDITIONS = 2_000  # comparisons in one filter ($in/$nin values count one each)
MAX_INTEGER = 2**63 - 1  # integers beyond a signed 64-bit one are refused
Scalar = str | int | float | bool


class FilterError(EddiRagError, ValueError):
    """A malformed filter. The message names the offending part by path."""
    status = 400


@dataclass(frozen=True)
class Compare:
    field: str
    op: str
    value: Any  # a scalar, or a tuple of scalars for $in/$nin (of strings for $containsAny/$containsNone)


@dataclass(frozen=True)
class And:
    children: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    children: tuple[Node, ...]


Node = Compare | And | Or
Where = Node | dict[str, Any] | None  # what a store accepts: the parsed tree (or a mapping to parse)


def _is_scalar(v: Any) -> bool:
    return isinstance(v, (str, int, float, bool))


def _shape(value: Any) -> str:
    """What a value is, without quoting it (error messages never echo the input)."""
    if isinstance(value, list):
        return f"a list of {len(value)}" + (f" holding {_shape(next(v for v in value if not _is_scalar(v)))}"
                                            if not all(_is_scalar(v) for v in value) else "")
    names = {dict: "an object", str: "a string", bool: "a boolean", type(None): "null", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def _check_number(value: Any, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise FilterError(f"{path}: {value!r} is not a finite number")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_INTEGER:
        raise FilterError(f"{path}: {value} is outside the 64-bit integer range")


def value_kind(v: Any) -> str | None:
    """``bool``, ``number`` or ``string`` (the types that compare with each other), else None."""
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return None


def scalar_kind(v: Scalar) -> str:
    """value_kind of a value the parser admitted (a filter's or stored metadata's scalar)."""
    kind = value_kind(v)
    if kind is None:
        raise FilterError(f"{v!r} is not a string, number or boolean")
    return kind


def _compare(field: str, op: str, value: Any, path: str) -> Compare:
    if op not in COMPARISONS:
        raise FilterError(f"{path}: unknown operator {op!r}; use one of {', '.join(COMPARISONS)}")
    if op in CONTAINS:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise FilterError(f"{path}: {op} needs a list of strings, got {_shape(value)}")
        if len(value) > MAX_VALUES:
            raise FilterError(f"{path}: {op} takes at most {MAX_VALUES:,} values, got {len(value):,}")
        return Compare(field, op, tuple(value))
    if op in ("$in", "$nin"):
        if not isinstance(value, list) or not all(_is_scalar(v) for v in value):
            raise FilterError(f"{path}: {op} needs a list of strings, numbers or booleans, got {_shape(value)}")
        if len(value) > MAX_VALUES:
            raise FilterError(f"{path}: {op} takes at most {MAX_VALUES:,} values, got {len(value):,}")
        for i, v in enumerate(value):
            _check_number(v, f"{path}[{i}]")
        return Compare(field, op, tuple(value))
    if not _is_scalar(value):
        raise FilterError(f"{path}: {op} needs a string, number or boolean, got {_shape(value)}")
    _check_number(value, path)
    if op in ("$gt", "$gte", "$lt", "$lte") and isinstance(value, bool):
        raise FilterError(f"{path}: {op} needs a number or a string, got {value!r}")
    return Compare(field, op, value)


def parse(where: Any, path: str = "where") -> Node | None:
    """Parse a ``where`` mapping into an AST (``None`` for an empty or absent filter); FilterError
    for a malformed one or one beyond MAX_DEPTH, MAX_VALUES or MAX_CONDITIONS."""
    tree = _parse(where, path, 0)
    if tree is not None and _conditions(tree) > MAX_CONDITIONS:
        raise FilterError(f"{path}: more than {MAX_CONDITIONS:,} conditions")
    return tree


def _conditions(tree: Node) -> int:
    if isinstance(tree, Compare):
        return len(tree.value) if tree.op in LISTED else 1
    return sum(_conditions(child) for child in tree.children)


def _parse(where: Any, path: str, depth: int) -> Node | None:
    if where is None or where == {}:
        return None
    if not isinstance(where, dict):
        raise FilterError(f"{path}: a filter must be an object, got {_shape(where)}")
    parts: list[Node] = []
    for key, value in where.items():
        here = f"{path}.{key}"
        if key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise FilterError(f"{here}: needs a non-empty list of filters")
            if depth >= MAX_DEPTH:
                raise FilterError(f"{here}: $and / $or nested more than {MAX_DEPTH} levels deep")
            children = []
            for i, sub in enumerate(value):
                node = _parse(sub, f"{here}[{i}]", depth + 1)
                if node is None:
                    raise FilterError(f"{here}[{i}]: empty filter")
                children.append(node)
            parts.append(And(tuple(children)) if key == "$and" else Or(tuple(children)))
        elif key.startswith("$"):
            raise FilterError(f"{here}: unknown logical operator {key!r}; use $and or $or")
        elif not key or '"' in key:
            raise FilterError(f"{here}: invalid field name {key!r}")
        elif isinstance(value, dict):
            if not value:
                raise FilterError(f"{here}: empty operator object")
            parts.extend(_compare(key, op, v, f"{here}.{op}") for op, v in value.items())
        else:
            parts.append(_compare(key, "$eq", value, here))
    return parts[0] if len(parts) == 1 else And(tuple(parts))


def node(where: Where, path: str = "where") -> Node | None:
    """The parsed tree of ``where``: a tree passes through (the caller parsed it once; stores
    receive it so), a mapping is parsed here (FilterError names what is wrong)."""
    if where is None or isinstance(where, (Compare, And, Or)):
        return where
    return parse(where, path)


def refuse_lists(node: Node | None, why: str) -> None:
    """A ValueError naming the ``$containsAny`` / ``$containsNone`` in ``node``, for a store that cannot answer them."""
    if isinstance(node, (And, Or)):
        for child in node.children:
            refuse_lists(child, why)
    elif node is not None and node.op in CONTAINS:
        raise FilterError(f"{node.op} on {node.field!r}: {why}")


# --- the reference evaluator -------------------------------------------------------------

_MISSING = object()


def _eq(actual: Any, value: Any) -> bool:
    return value_kind(actual) is not None and value_kind(actual) == value_kind(value) and actual == value


def holds_any(actual: Any, values: tuple[str, ...]) -> bool:
    """Whether ``actual`` is a list holding one of the strings ``values``."""
    return isinstance(actual, list) and any(isinstance(e, str) and e in values for e in actual)


def _test(c: Compare, actual: Any) -> bool:
    if c.op in CONTAINS:
        return holds_any(actual, c.value) == (c.op == "$containsAny")
    if c.op == "$eq":
        return _eq(actual, c.value)
    if c.op == "$ne":
        return not _eq(actual, c.value)
    if c.op == "$in":
        return any(_eq(actual, v) for v in c.value)
    if c.op == "$nin":
        return not any(_eq(actual, v) for v in c.value)
    if value_kind(actual) is None or value_kind(actual) != value_kind(c.value):
        return False
    return {
        "$gt": actual > c.value,
        "$gte": actual >= c.value,
        "$lt": actual < c.value,
        "$lte": actual <= c.value,
    }[c.op]


def matches(node: Node | None, metadata: dict[str, Any]) -> bool:
    if node is None:
        return True
    if isinstance(node, And):
        return all(matches(n, metadata) for n in node.children)
    if isinstance(node, Or):
        return any(matches(n, metadata) for n in node.children)
    return _test(node, metadata.get(node.field, _MISSING))
