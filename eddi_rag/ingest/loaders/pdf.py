"""PDF: the text of each page (pypdf), cited as ``page`` (1-based), as Markdown with the PDF's own headings and
without its running headers and footers (``ingest.pdf_structure``). A page without a usable text layer (a scan:
fewer than ``ocr.MIN_TEXT_CHARS`` letters and digits) is rendered (pypdfium2) and read by OCR under ``ocr`` mode
``auto`` (every page with ``always``, none with ``off``); such a page's part says so (``ocr``, ``ocrConfidence``).
The pages OCR will read are counted against ``max_ocr_pages`` before any is read, and each rendered page against
``max_image_pixels`` before it is drawn."""

from __future__ import annotations

import io
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from eddi_rag.ingest import ocr as engine
from eddi_rag.ingest import pdf_structure as structure
from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError


def _usable(text: str) -> bool:
    return sum(ch.isalnum() for ch in text) >= engine.MIN_TEXT_CHARS


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter, ocr: dict[str, Any]) -> list[Part]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise UnreadableDocumentError(f"{name}: the PDF is encrypted; upload a copy without a password")
        meter.whole("pages", len(reader.pages))
        laid = [structure.read_page(page) for page in reader.pages]
        outline = structure.outline_titles(reader)
    except UnreadableDocumentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable PDF ({type(e).__name__}: {e})") from e
    mode = ocr["mode"]
    texts = [" ".join(line.text for line in page.lines) for page in laid]
    scans = [] if mode == "off" else [n for n, text in enumerate(texts, 1) if mode == "always" or not _usable(text)]
    read = _ocr(data, name, scans, meter, ocr["languages"]) if scans else {}
    parts = []
    for n, (text, carried) in enumerate(structure.to_markdown(structure.without_running_lines(laid), outline), 1):
        if n in read:
            parts.append(replace(read[n], headings=carried))
        else:
            meter.count("pages")
            if text:
                parts.append(Part(text, {"page": n}, markdown=True, headings=carried))
    if not any(p.text.strip() for p in parts):
        hint = "(a scan? this knowledge base has ocr 'off')" if mode == "off" else "(OCR found none either)"
        raise UnreadableDocumentError(f"{name}: the PDF has {len(laid)} page(s) but no extractable text {hint}")
    return parts


def _ocr(data: bytes, name: str, numbers: list[int], meter: Counter, languages: list[str]) -> dict[int, Part]:
    """The pages ``numbers`` rendered at ``ocr.DPI`` and read by OCR, each as its part."""
    import pypdfium2 as pdfium

    meter.ocr_pages(len(numbers))
    engine.check(languages)
    scale = engine.DPI / 72
    out: dict[int, Part] = {}
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable PDF ({e})") from e
    try:
        for n in numbers:
            page = doc[n - 1]
            width, height = page.get_size()
            meter.pixels(round(width * scale), round(height * scale), f"{name}, page {n} at {engine.DPI} dpi")
            image = page.render(scale=scale, grayscale=True).to_pil()
            read = engine.read(image, languages)
            out[n] = Part(read.text, {"page": n, "ocr": True, "ocrConfidence": round(read.confidence, 3)})
            meter.count("pages")
    finally:
        doc.close()
    return out
