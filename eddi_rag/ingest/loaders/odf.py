"""OpenDocument files (odfpy), read by ``odt``, ``ods`` and ``odp``: the parsed document and its elements' text."""

from __future__ import annotations

import io
import re
from typing import Any

from eddi_rag.ingest.loaders import UnreadableDocumentError, rewritten

MAX_REPEAT = 1_000  # a cell or row repeated more often than this is layout (an empty sheet's last row), not data


# A document type naming an external DTD and declaring nothing itself (``<!DOCTYPE math:math PUBLIC "…" "math.dtd">``:
# LibreOffice's formula objects): odfpy's parser (defusedxml) refuses the reference, and the declaration adds nothing
# to the text, so it is left out. One with an internal subset (entities) is still refused.
_EXTERNAL_DOCTYPE = re.compile(rb"<!DOCTYPE[^>\[]*>")


def opened(data: bytes, name: str, kind: str) -> Any:
    from defusedxml import ExternalReferenceForbidden
    from odf.opendocument import load

    try:
        try:
            return load(io.BytesIO(data))
        except ExternalReferenceForbidden:
            return load(io.BytesIO(_without_external_doctypes(data)))
    except Exception as e:  # noqa: BLE001 - a bad zip, a broken XML part: whatever odfpy raises is the file's problem
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable {kind} ({type(e).__name__}: {e})") from e


def _without_external_doctypes(data: bytes) -> bytes:
    """The package with each XML part's external document type declaration left out (its head only is searched)."""
    return rewritten(data, lambda name, part: _EXTERNAL_DOCTYPE.sub(b"", part[:1024], count=1) + part[1024:]
                     if name.endswith(".xml") else part)


def text_of(element: Any) -> str:
    from odf import teletype

    return " ".join(teletype.extractText(element).split())


def kind(element: Any) -> str:
    """An element's local name: ``h``, ``p``, ``list``, ``table``..."""
    return element.qname[1] if getattr(element, "qname", None) else ""


def repeated(element: Any, attribute: str) -> int:
    try:
        return max(1, int(element.getAttribute(attribute) or 1))
    except (ValueError, TypeError):
        return 1


def table_rows(table: Any, meter: Any) -> list[list[str]]:
    """A table's rows of cell texts, repeated rows and cells expanded while they hold text (up to ``MAX_REPEAT``)."""
    from odf.table import TableCell, TableRow

    rows: list[list[str]] = []
    for row in table.getElementsByType(TableRow):
        cells: list[str] = []
        for cell in row.getElementsByType(TableCell):
            value = text_of(cell)
            cells += [value] * (min(repeated(cell, "numbercolumnsrepeated"), MAX_REPEAT) if value else 1)
        while cells and not cells[-1]:
            cells.pop()
        times = repeated(row, "numberrowsrepeated")
        if not cells:
            rows += [[]] * (1 if times > MAX_REPEAT else times)
            continue
        for _ in range(min(times, MAX_REPEAT)):
            meter.count("rows")
            rows.append(cells)
    while rows and not rows[-1]:
        rows.pop()
    return rows
