"""OpenDocument presentation (``.odp``, odfpy): each slide's text (its title first, then its other frames, then
its speaker notes), cited as ``slide`` (1-based) with ``slideTitle``, as a PPTX slide is."""

from __future__ import annotations

from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part
from eddi_rag.ingest.loaders.odf import kind, opened, text_of


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    from odf.draw import Frame, Page
    from odf.namespaces import PRESENTATIONNS

    document = opened(data, name, "OpenDocument presentation")
    slides = document.presentation.getElementsByType(Page)
    meter.whole("pages", len(slides))
    parts = []
    for n, slide in enumerate(slides, 1):
        meter.count("pages")
        title, body, notes = "", [], []
        for frame in slide.getElementsByType(Frame):
            text = text_of(frame)
            in_notes = kind(frame.parentNode) == "notes"
            if not text:
                continue
            if in_notes:
                notes.append(text)
            elif frame.getAttrNS(PRESENTATIONNS, "class") == "title" and not title:
                title = text
            else:
                body.append(text)
        text = "\n\n".join(t for t in (title, *body, f"Notes: {' '.join(notes)}" if notes else "") if t)
        parts.append(Part(text, {"slide": n, **({"slideTitle": title} if title else {})}))
    return parts
