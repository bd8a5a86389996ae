"""Tables as text that explains itself: each row written as ``header: value`` lines, consecutive
rows packed into one part while it fits a chunk, cited by the rows (and cells) it holds."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from eddi_rag.ingest.loaders import Part


@dataclass(frozen=True)
class Row:
    number: int  # spreadsheet numbering: the header row is 1
    text: str
    first_col: int = 1  # 1-based columns of the first and last non-empty cells
    last_col: int = 1


def row_lines(header: Sequence[str], values: Sequence[Any]) -> list[str]:
    """``header: value`` for every non-empty value; a column without a header is named by its letter."""
    from openpyxl.utils import get_column_letter

    lines = []
    for i, value in enumerate(values):
        text = format_value(value)
        if text:
            name = (header[i].strip() if i < len(header) and header[i] else "") or f"Column {get_column_letter(i + 1)}"
            lines.append(f"{name}: {text}")
    return lines


def table_blocks(rows: list[list[str]]) -> list[str]:
    """A table (first row = header) as one ``header: value`` block per data row; a table that is
    only a header row as its cells joined by `` | ``."""
    if not rows:
        return []
    header = rows[0]
    return ["\n".join(row_lines(header, row)) for row in rows[1:]] or [" | ".join(h for h in header if h)]


TITLE_ROWS = 10  # rows above a sheet's header read as its title, at most


def header_at(leading: Sequence[Sequence[Any]]) -> int:
    """Where a sheet's header row is among its first rows: past the title rows above it (each at most one filled cell,
    "Quarterly prices 2027", or empty) when a row with two or more filled cells follows within ``TITLE_ROWS``; else the
    first row, as before."""
    for i, row in enumerate(leading[:TITLE_ROWS + 1]):
        if sum(1 for v in row if format_value(v)) >= 2:
            return i
    return 0


def titled(lead: str, titles: Sequence[Sequence[Any]]) -> str:
    """``lead`` (``Sheet: Prices``) with the title rows above the header after it, on every part of the sheet."""
    text = " / ".join(format_value(v) for row in titles for v in row if format_value(v))
    return f"{lead}\n{text}" if text else lead


def format_value(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value).strip()


ROW_CHUNKS_UP_TO = 500  # a table of at most this many rows has a chunk per row: each row found (and cited) alone


def pack_rows(rows: list[Row], lead: str, fits: Callable[[str], bool],
              cite: Callable[[list[Row]], dict[str, Any]]) -> list[Part]:
    """A small table (``ROW_CHUNKS_UP_TO`` rows) a part per row under ``lead`` (e.g. ``Sheet: Stocks``): a price list's
    question finds its row, not the first of a chunk of eight. A larger one: consecutive rows while the text fits;
    a row too long alone gets a part of its own (the chunker cuts it, keeping its citation)."""
    parts: list[Part] = []
    group: list[Row] = []

    def text(rows_: list[Row]) -> str:
        return "\n\n".join([lead, *(r.text for r in rows_)])

    if len(rows) <= ROW_CHUNKS_UP_TO:
        return [Part(text([row]), cite([row])) for row in rows]

    for row in rows:
        if group and not fits(text([*group, row])):
            parts.append(Part(text(group), cite(group)))
            group = []
        group.append(row)
    if group:
        parts.append(Part(text(group), cite(group)))
    return parts


def row_span(rows: list[Row]) -> dict[str, Any]:
    """``row`` (the first) and, for several, ``rows`` as ``12-14``."""
    out: dict[str, Any] = {"row": rows[0].number}
    if len(rows) > 1:
        out["rows"] = f"{rows[0].number}-{rows[-1].number}"
    return out
