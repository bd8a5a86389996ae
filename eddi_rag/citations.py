"""Where a chunk came from, as a citation names it: ``rapport.pdf, page 3``,
``production.xlsx, Stocks!C12``, ``deck.pptx, slide 4``, ``data.csv, rows 12-14``,
``guide.md, # Guide > ## Refunds``."""

from __future__ import annotations

from typing import Any


def location(m: dict[str, Any]) -> str | None:
    """The place inside the document, from the chunk's citation metadata; None when unknown."""
    if m.get("sheet") is not None:
        cell = m.get("cell") or m.get("cells")
        return f"{m['sheet']}!{cell}" if cell else f"{m['sheet']}, row {m.get('row')}"
    if m.get("page") is not None:
        return f"page {m['page']}"
    if m.get("slide") is not None:
        return f"slide {m['slide']}"
    if m.get("rows"):
        return f"rows {m['rows']}"
    if m.get("row") is not None:
        return f"row {m['row']}"
    return m.get("section") or m.get("cell") or None


def source_label(m: dict[str, Any]) -> str:
    """The document, and where in it when known."""
    source = str(m.get("source") or "unknown source")
    where = location(m)
    return f"{source}, {where}" if where else source
