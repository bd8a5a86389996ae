"""DOCX (python-docx): paragraphs and tables in document order, as Markdown; ``Title`` and
``Heading n`` styles become headings, so the section path comes from them; a table's rows are
written as ``header: value`` lines."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError
from eddi_rag.ingest.loaders.rows import table_blocks

_HEADING = re.compile(r"^(?:heading|überschrift|titre)\s*(\d)$", re.I)


def _heading_level(style_name: str) -> int | None:
    if style_name.lower() == "title":
        return 1
    m = _HEADING.match(style_name.strip())
    return int(m.group(1)) if m else None


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    import docx
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable DOCX ({type(e).__name__}: {e})") from e
    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            meter.count("rows", len(item.rows))
            blocks += table_blocks([[cell.text.strip() for cell in row.cells] for row in item.rows])
            continue
        text = item.text.strip()
        if not text:
            continue
        level = _heading_level(item.style.name if item.style is not None else "")
        blocks.append(f"{'#' * level} {text}" if level else text)
    return [Part("\n\n".join(b for b in blocks if b.strip()), markdown=True)]
