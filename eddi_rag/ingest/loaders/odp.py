"""OpenDocument presentation (``.odp``, odfpy): each slide's text (its title first, then its other frames and shapes,
then the footer it shows (its master page's, as the slide declares it), then its speaker notes), cited as ``slide``
(1-based) with ``slideTitle``, as a PPTX slide is. A frame's paragraphs and list items are lines of their own and its
table ``header: value`` lines (as in an ODT), not run together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddi_rag.ingest.loaders import Counter, Part
from eddi_rag.ingest.loaders.odf import kind, opened, text_of
from eddi_rag.ingest.loaders.odt import blocks


def _texts(shape: Any, meter: Counter) -> str:
    """A frame's or a shape's text: its paragraphs and lists (a custom shape holds them itself, a frame in its text
    box), its table's rows."""
    out: list[str] = []
    blocks(shape, out, meter)  # (its paragraphs, lists and tables)
    for child in shape.childNodes:
        if kind(child) == "text-box":
            blocks(child, out, meter)
    return "\n".join(t for t in out if t.strip())


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    from odf.draw import CustomShape, Frame, Page
    from odf.namespaces import PRESENTATIONNS
    from odf.presentation import FooterDecl

    document = opened(data, name, "OpenDocument presentation")
    slides = document.presentation.getElementsByType(Page)
    footers = {d.getAttrNS(PRESENTATIONNS, "name"): text_of(d) for d in document.presentation.getElementsByType(FooterDecl)}
    meter.whole("pages", len(slides))
    parts = []
    for n, slide in enumerate(slides, 1):
        meter.count("pages")
        title, body, notes = "", [], []
        for frame in [*slide.getElementsByType(Frame), *slide.getElementsByType(CustomShape)]:
            in_notes = kind(frame.parentNode) == "notes"
            text = text_of(frame) if in_notes else _texts(frame, meter)
            if not text:
                continue
            if in_notes:
                notes.append(text)
            elif frame.getAttrNS(PRESENTATIONNS, "class") == "title" and not title:
                title = text
            else:
                body.append(text)
        footer = footers.get(slide.getAttrNS(PRESENTATIONNS, "use-footer-name"), "")  # the master page's footer, as shown
        text = "\n\n".join(t for t in (title, *body, f"Footer: {footer}" if footer else "",
                                        f"Notes: {' '.join(notes)}" if notes else "") if t)
        parts.append(Part(text, {"slide": n, **({"slideTitle": title} if title else {})}))
    return parts
