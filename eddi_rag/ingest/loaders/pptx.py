"""PPTX (python-pptx): the text of each slide (title first, then text frames, tables as
``header: value`` lines, then the speaker notes), cited as ``slide`` (1-based)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError
from eddi_rag.ingest.loaders.rows import table_blocks


def _shape_texts(shapes) -> list[str]:
    out: list[str] = []
    for shape in shapes:
        if getattr(shape, "shape_type", None) == 6 and hasattr(shape, "shapes"):  # a group
            out += _shape_texts(shape.shapes)
        elif getattr(shape, "has_table", False) and shape.has_table:
            out += table_blocks([[cell.text.strip() for cell in row.cells] for row in shape.table.rows])
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame and shape.text_frame.text.strip():
            out.append(shape.text_frame.text.strip())
    return out


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    from pptx import Presentation

    try:
        deck = Presentation(io.BytesIO(data))
    except (zipfile.BadZipFile, KeyError, ValueError) as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable PPTX ({type(e).__name__}: {e})") from e
    parts = []
    meter.whole("pages", len(deck.slides))
    for n, slide in enumerate(deck.slides, 1):
        meter.count("pages")
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None and title_shape.has_text_frame else ""
        title_id = title_shape.shape_id if title_shape is not None else None
        body = _shape_texts(s for s in slide.shapes if s.shape_id != title_id)
        notes = (slide.notes_slide.notes_text_frame.text.strip()
                 if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None else "")
        text = "\n\n".join(t for t in (title, *body, f"Notes: {notes}" if notes else "") if t)
        meta = {"slide": n, **({"slideTitle": title} if title else {})}
        parts.append(Part(text, meta))
    return parts
