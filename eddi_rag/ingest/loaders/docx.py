"""DOCX (python-docx): paragraphs and tables in document order, as Markdown; ``Title`` and
``Heading n`` styles become headings, so the section path comes from them; a table's rows are
written as ``header: value`` lines."""

from __future__ import annotations

import io
import re
import zipfile
from collections.abc import Callable
from typing import Any

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError, ooxml
from eddi_rag.ingest.loaders.rows import table_blocks

_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
_HEADING = re.compile(r"^(?:heading|überschrift|titre)\s*(\d)$", re.I)


def _heading_level(style_name: str) -> int | None:
    if style_name.lower() == "title":
        return 1
    m = _HEADING.match(style_name.strip())
    return int(m.group(1)) if m else None


def text_boxes(paragraph: Any) -> list[str]:
    """The paragraphs of the text boxes anchored in a paragraph (``w:txbxContent``: a callout, a sidebar), which its
    own text leaves out; a box Word also writes as a VML copy for older readers (``mc:Fallback``) is read once."""
    from docx.oxml.ns import qn

    out = []
    for box in paragraph.iter(qn("w:txbxContent")):
        if any(ancestor.tag == _FALLBACK for ancestor in box.iterancestors()):
            continue
        for p in box.iter(qn("w:p")):
            text = "".join(t.text or "" for t in p.iter(qn("w:t"))).strip()
            if text:
                out.append(text)
    return out


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    import docx
    from docx.table import Table

    data = ooxml.as_transitional(data)  # (ISO Strict, Word's "Strict Open XML": read as Transitional)
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
        if text:
            level = _heading_level(item.style.name if item.style is not None else "")
            blocks.append(f"{'#' * level} {text}" if level else text)
        blocks += text_boxes(item._p)
    return [Part("\n\n".join(b for b in blocks if b.strip()), markdown=True)]
