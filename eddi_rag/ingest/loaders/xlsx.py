"""XLSX (openpyxl, cached values): per sheet, row 1 is the header (or the first row of two or more filled cells, past
title rows above it, which lead every part of the sheet); each later row is written as
``header: value`` lines. Cited as ``sheet``, ``row`` and ``cell`` (one cell, ``C12``) or
``cells`` (``A12:C12``, ``A12:C14`` for packed rows)."""

from __future__ import annotations

import io
import itertools
import zipfile
from collections.abc import Callable
from typing import Any

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError, ooxml
from eddi_rag.ingest.loaders.rows import TITLE_ROWS, Row, format_value, header_at, pack_rows, row_lines, row_span, titled


def cite_cells(sheet: str) -> Callable[[list[Row]], dict[str, Any]]:
    from openpyxl.utils import get_column_letter

    def cite(rows: list[Row]) -> dict[str, Any]:
        first = min(r.first_col for r in rows)
        last = max(r.last_col for r in rows)
        top, bottom = rows[0].number, rows[-1].number
        meta: dict[str, Any] = {"sheet": sheet, **row_span(rows)}
        if first == last and top == bottom:
            meta["cell"] = f"{get_column_letter(first)}{top}"
        else:
            meta["cells"] = f"{get_column_letter(first)}{top}:{get_column_letter(last)}{bottom}"
        return meta

    return cite


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    from openpyxl import load_workbook

    data = ooxml.as_transitional(data)  # (ISO Strict, Word's "Strict Open XML": read as Transitional)
    try:
        book = load_workbook(io.BytesIO(data), read_only=True, data_only=True)
    except (zipfile.BadZipFile, KeyError, ValueError, OSError) as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable XLSX ({type(e).__name__}: {e})") from e
    parts: list[Part] = []
    try:
        for sheet in book.worksheets:
            values = sheet.iter_rows(values_only=True)
            leading = list(itertools.islice(values, TITLE_ROWS + 1))
            at = header_at(leading)  # (title rows above the header: the sheet's lead, not the header)
            header = [format_value(v) for v in (leading[at] if leading else ())]
            rows = []
            for number, row in enumerate(itertools.chain(leading[at + 1:], values), at + 2):
                meter.count("rows")
                filled = [i for i, v in enumerate(row) if format_value(v)]
                if filled:
                    rows.append(Row(number, "\n".join(row_lines(header, row)), filled[0] + 1, filled[-1] + 1))
            if not rows and any(header):  # a sheet that is only a header row: keep it, it is content too
                rows.append(Row(at + 1, " | ".join(h for h in header if h), 1, len(header)))
            parts += pack_rows(rows, titled(f"Sheet: {sheet.title}", leading[:at]), fits, cite_cells(sheet.title))
    finally:
        book.close()
    return parts
