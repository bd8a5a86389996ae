"""OpenDocument text (``.odt``, odfpy): headings (their outline level), paragraphs, lists and tables in document
order as Markdown, so headings give the ``section`` path; a table's rows written as ``header: value`` lines."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddi_rag.ingest.loaders import Counter, Part
from eddi_rag.ingest.loaders.odf import kind, opened, table_rows, text_of
from eddi_rag.ingest.loaders.rows import table_blocks


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    document = opened(data, name, "OpenDocument text")
    found: list[str] = []
    blocks(document.text, found, meter)
    return [Part("\n\n".join(b for b in found if b.strip()), markdown=True)]


def blocks(element: Any, out: list[str], meter: Counter) -> None:
    """An element's headings, paragraphs, lists and tables, in order, as Markdown blocks into ``out`` (sections and
    the like entered); an ODP frame's text box is read the same way."""
    for child in element.childNodes:
        what = kind(child)
        if what == "h":
            try:
                level = min(6, max(1, int(child.getAttribute("outlinelevel") or 1)))
            except (ValueError, TypeError):
                level = 1
            if text := text_of(child):
                out.append(f"{'#' * level} {text}")
        elif what == "p":
            if text := text_of(child):
                out.append("\\" + text if text.startswith("#") else text)
        elif what == "list":
            items = [text_of(item) for item in child.childNodes if kind(item) == "list-item"]
            out.append("\n".join(f"- {t}" for t in items if t))
        elif what == "table":
            out += table_blocks(table_rows(child, meter))
        elif what in ("section", "text", "div"):
            blocks(child, out, meter)
