"""OpenDocument spreadsheet (``.ods``, odfpy): per sheet, row 1 is the header (past title rows above it, as in an
XLSX); each later row is written as
``header: value`` lines and cited as an XLSX row is (``sheet``, ``row``, ``cell`` or ``cells``)."""

from __future__ import annotations

from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part
from eddi_rag.ingest.loaders.odf import opened, table_rows
from eddi_rag.ingest.loaders.rows import Row, header_at, pack_rows, row_lines, titled
from eddi_rag.ingest.loaders.xlsx import cite_cells


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    from odf.table import Table

    document = opened(data, name, "OpenDocument spreadsheet")
    parts: list[Part] = []
    root = document.spreadsheet  # (odfpy's handle on office:spreadsheet; a KSpread file leaves it a text node)
    for sheet in (root if hasattr(root, "getElementsByType") else document.body).getElementsByType(Table):
        title = str(sheet.getAttribute("name") or "Sheet")
        values = table_rows(sheet, meter)
        if not values:
            continue
        at = header_at(values)  # (title rows above the header: the sheet's lead, not the header)
        header, rows = values[at], []
        for number, row in enumerate(values[at + 1:], at + 2):
            filled = [i for i, v in enumerate(row) if v]
            if filled:
                rows.append(Row(number, "\n".join(row_lines(header, row)), filled[0] + 1, filled[-1] + 1))
        if not rows and any(header):
            rows.append(Row(at + 1, " | ".join(h for h in header if h), 1, len(header)))
        parts += pack_rows(rows, titled(f"Sheet: {title}", values[:at]), fits, cite_cells(title))
    return parts
