"""JSON values as every part of the product can store and send them back: finite numbers only
(Python's json reads ``NaN``, ``Infinity`` and ``1e400`` as floats no JSON encoder may write) and
bounded nesting."""

from __future__ import annotations

import math
from typing import Any

MAX_DEPTH = 64  # nesting of arrays and objects


def problem(value: Any, path: str = "$", depth: int = 0) -> str | None:
    """Where ``value`` is not storable JSON, and why (``None``: it is): the first non-finite
    number, or the first structure nested more than MAX_DEPTH levels."""
    if isinstance(value, float) and not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return f"{path}: {shown} is not a finite number (JSON has no NaN or Infinity)"
    if isinstance(value, (dict, list)):
        if depth >= MAX_DEPTH:
            return f"{path if len(path) <= 100 else path[:60] + '…' + path[-30:]}: nested more than {MAX_DEPTH} levels deep"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            found = problem(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]", depth + 1)
            if found:
                return found
    return None
