"""CSV (the csv module, dialect sniffed): row 1 is the header; each later row is written as
``header: value`` lines; cited as ``row`` (same numbering as a spreadsheet) and ``rows``."""

from __future__ import annotations

import csv as csvlib
import io
from collections.abc import Callable

from eddi_rag.ingest.loaders import Part, UnreadableDocumentError, decode_text
from eddi_rag.ingest.loaders.rows import Row, pack_rows, row_lines, row_span


def load(data: bytes, name: str, fits: Callable[[str], bool]) -> list[Part]:
    text = decode_text(data)
    try:
        dialect = csvlib.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csvlib.Error:
        dialect = csvlib.excel
    try:
        records = list(csvlib.reader(io.StringIO(text), dialect))
    except csvlib.Error as e:
        raise UnreadableDocumentError(f"{name}: unreadable CSV ({e})") from e
    if not records:
        return []
    header = records[0]
    rows = [Row(number, "\n".join(row_lines(header, record)))
            for number, record in enumerate(records[1:], 2) if any(v.strip() for v in record)]
    return pack_rows(rows, f"Table: {name}", fits, row_span)
