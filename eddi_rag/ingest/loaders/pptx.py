"""PPTX (python-pptx): the text of each slide (title first, then text frames, tables and charts' data as
``header: value`` lines, then the speaker notes), cited as ``slide`` (1-based)."""

from __future__ import annotations

import io
import zipfile
from collections.abc import Callable
from typing import Any

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError, ooxml
from eddi_rag.ingest.loaders.rows import table_blocks


def _shape_texts(shapes) -> list[str]:
    out: list[str] = []
    for shape in shapes:
        if getattr(shape, "shape_type", None) == 6 and hasattr(shape, "shapes"):  # a group
            out += _shape_texts(shape.shapes)
        elif getattr(shape, "has_chart", False) and shape.has_chart:
            out += _chart(shape.chart)
        elif getattr(shape, "has_table", False) and shape.has_table:
            out += table_blocks([[cell.text.strip() for cell in row.cells] for row in shape.table.rows])
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame and shape.text_frame.text.strip():
            out.append(shape.text_frame.text.strip())
    return out


def _chart(chart: Any) -> list[str]:
    """A chart's title and its data as a table (a row per category, a column per series: ``header: value`` lines),
    the numbers a reader of the slide sees."""
    title = chart.chart_title.text_frame.text.strip() if chart.has_title and chart.chart_title.has_text_frame else ""
    try:
        plots = list(chart.plots)
        categories = [str(c) for c in plots[0].categories] if plots else []
        series = [s for plot in plots for s in plot.series]
        values = [list(s.values) for s in series]
    except (KeyError, ValueError, IndexError, AttributeError, NotImplementedError):  # no data cache, or a chart type
        # python-pptx cannot read (area3DChart): its title alone
        return [f"Chart: {title}"] if title else []
    rows = [["Category", *(s.name or f"Series {i}" for i, s in enumerate(series, 1))]]
    for i, category in enumerate(categories):
        rows.append([category, *("" if i >= len(v) or v[i] is None else f"{v[i]:g}" for v in values)])
    return [*([f"Chart: {title}"] if title else []), *table_blocks(rows)]


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    from pptx import Presentation

    data = ooxml.as_transitional(data)  # (ISO Strict, Word's "Strict Open XML": read as Transitional)
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
