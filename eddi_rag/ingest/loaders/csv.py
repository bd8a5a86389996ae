"""CSV (the csv module, dialect sniffed): row 1 is the header; each later row is written as
``header: value`` lines; cited as ``row`` (same numbering as a spreadsheet) and ``rows``."""

from __future__ import annotations

import csv as csvlib
import io
from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError, decode_text
from eddi_rag.ingest.loaders.rows import Row, pack_rows, row_lines, row_span


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    text = decode_text(data)
    try:
        dialect = csvlib.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csvlib.Error:
        dialect = csvlib.excel
    records = csvlib.reader(io.StringIO(text), dialect)
    rows: list[Row] = []
    try:
        header = next(records, None)
        if header is None:
            return []
        for number, record in enumerate(records, 2):
            meter.count("rows")
            if any(v.strip() for v in record):
                rows.append(Row(number, "\n".join(row_lines(header, record))))
    except csvlib.Error as e:
        raise UnreadableDocumentError(f"{name}: unreadable CSV ({e})") from e
    return pack_rows(rows, f"Table: {name}", fits, row_span)
