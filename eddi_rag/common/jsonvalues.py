"""JSON values as every part of the product can store and send them back: finite numbers only
(Python's json reads ``NaN``, ``Infinity`` and ``1e400`` as floats no JSON encoder may write),
bounded nesting, and text without lone surrogates (``"\ud800"`` is valid JSON but no UTF-8: SQLite,
logs and every store refuse it) or control characters other than tab, line feed and carriage return
(NUL ends strings in C libraries; the others are never text)."""

from __future__ import annotations

import math
import re
from typing import Any

MAX_DEPTH = 64  # nesting of arrays and objects
_NOT_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
_NOT_A_NAME = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")  # names and ids: no tab or line break either


def text_problem(text: str, where: str, name: bool = False) -> str | None:
    """Why ``text`` is not storable text (``None``: it is), naming ``where`` and never quoting ``text``.
    ``name``: an identifier or name (a query parameter, a file name), where tabs and line breaks are refused too."""
    found = (_NOT_A_NAME if name else _NOT_TEXT).search(text)
    if found is None:
        return None
    code = ord(found.group())
    what = "a lone surrogate" if 0xD800 <= code <= 0xDFFF else "NUL" if code == 0 else "a control character"
    return f"{where}: {what} (U+{code:04X}) at position {found.start()} is not allowed"


def problem(value: Any, path: str = "$", depth: int = 0) -> str | None:
    """Where ``value`` is not storable JSON, and why (``None``: it is): the first non-finite
    number, or the first structure nested more than MAX_DEPTH levels."""
    if isinstance(value, float) and not math.isfinite(value):
        shown = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return f"{path}: {shown} is not a finite number (JSON has no NaN or Infinity)"
    if isinstance(value, str):
        return text_problem(value, path)
    if isinstance(value, (dict, list)):
        if depth >= MAX_DEPTH:
            return f"{path if len(path) <= 100 else path[:60] + '…' + path[-30:]}: nested more than {MAX_DEPTH} levels deep"
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and (wrong := text_problem(key, f"{path} (a key)", name=True)):
                return wrong
            found = problem(item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]", depth + 1)
            if found:
                return found
    return None
