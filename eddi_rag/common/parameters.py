"""storeParameters / embeddingParameters as EDDI writes them: ``Map<String, String>`` with its own
keys. Each provider's parameter schema may declare aliases (``{"x-alias-of": "tableName"}``: EDDI's
``table`` is our ``tableName``, one meaning), and values are coerced to the declared type
(``"5432"`` → 5432, ``"false"`` → False) — when a configuration is validated (a value that cannot
be read is a 400 naming the path and the type) and when the provider is built (after secret
references are resolved). What the author sent is what is stored and shown."""

from __future__ import annotations

import math
import re
from typing import Any

from eddi_rag.common.secrets import is_reference

ALIAS = "x-alias-of"
_INTEGER = re.compile(r"[+-]?\d+")


def alias(target: str, note: str = "") -> dict[str, Any]:
    """A parameter that is another spelling (EDDI's) of ``target``."""
    return {ALIAS: target, "description": f"EDDI's spelling of {target}: the same parameter.{' ' + note if note else ''}"}


def _types(spec: dict[str, Any]) -> list[str]:
    declared = spec.get("type")
    if isinstance(declared, list):
        return declared
    if declared:
        return [declared]
    if "enum" in spec:  # an enum without a type: the types of its values
        names = {bool: "boolean", int: "integer", float: "number", str: "string"}
        return sorted({names.get(type(v), "string") for v in spec["enum"]})
    return []


def _coerce(value: str, types: list[str]) -> Any:
    """``value`` read as the first declared type that accepts it; raises ValueError."""
    if "string" in types or not types:
        return value
    text = value.strip()
    for kind in types:
        if kind == "integer" and _INTEGER.fullmatch(text):
            return int(text)
        if kind == "number":
            try:
                number = float(text)
            except ValueError:
                continue
            if math.isfinite(number):
                return int(number) if _INTEGER.fullmatch(text) else number
        if kind == "boolean" and text.lower() in ("true", "false"):
            return text.lower() == "true"
    raise ValueError(" or ".join(types))


def normalise(schema: dict[str, Any], params: dict[str, Any], field: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(params with aliases renamed to their canonical names and strings coerced to the declared
    types, errors as {path, message, value}). Unknown keys and secret references pass untouched."""
    props = schema.get("properties", {})
    out: dict[str, Any] = {}
    errors: list[dict[str, Any]] = []
    spelled: dict[str, str] = {}
    for key, value in params.items():
        name = props.get(key, {}).get(ALIAS, key)
        if name in out and out[name] != value:
            errors.append({"path": f"$.{field}.{key}", "value": value,
                           "message": f"{key!r} and {spelled[name]!r} name the same parameter with different values"})
            continue
        out[name], spelled[name] = value, key
    for name, value in list(out.items()):
        spec = props.get(name)
        if spec is None or not isinstance(value, str) or is_reference(value):
            continue
        try:
            out[name] = _coerce(value, _types(spec))
        except ValueError as e:
            errors.append({"path": f"$.{field}.{spelled[name]}", "value": value,
                           "message": f"{value!r} cannot be read as {e} (the declared type of {name})"})
    return out, errors
