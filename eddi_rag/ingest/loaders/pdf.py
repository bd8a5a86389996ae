"""PDF: the text of each page (pypdf), cited as ``page`` (1-based), as Markdown with the PDF's own headings and
without its running headers and footers (``ingest.pdf_structure``). A page without a usable text layer (a scan:
fewer than ``ocr.MIN_TEXT_CHARS`` letters and digits) is rendered (pypdfium2) and read by OCR under ``ocr`` mode
``auto`` (every page with ``always``, none with ``off``); such a page's part says so (``ocr``, ``ocrConfidence``),
and its headings are found by their size and numbering as a digital page's are. Every page keeps its lines' boxes
(``ingest.boxes``: a chunk's place on the page).
The pages OCR will read are counted against ``max_ocr_pages`` before any is read, and each rendered page against
``max_image_pixels`` before it is drawn."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from eddi_rag.ingest import boxes
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
        # an owner password alone ("copy-protected") opens with the empty user password, as every reader opens it
        if reader.is_encrypted and not reader.decrypt(""):
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
    confidence, lines = _place(data, name, laid, scans, meter, ocr["languages"])
    parts = []
    for n, (text, carried) in enumerate(structure.to_markdown(structure.without_running_lines(laid), outline), 1):
        if n not in confidence:
            meter.count("pages")
        read = {"ocr": True, "ocrConfidence": confidence[n]} if n in confidence else {}
        if text:
            parts.append(Part(text, {"page": n, **read}, markdown=True, headings=carried, lines=tuple(lines[n])))
    if not any(p.text.strip() for p in parts):
        hint = "(a scan? this knowledge base has ocr 'off')" if mode == "off" else "(OCR found none either)"
        raise UnreadableDocumentError(f"{name}: the PDF has {len(laid)} page(s) but no extractable text {hint}")
    return parts


def _place(data: bytes, name: str, laid: list[structure.Page], scans: list[int], meter: Counter,
           languages: list[str]) -> tuple[dict[int, float], dict[int, list[boxes.Line]]]:
    """Each page's lines with their boxes (pypdfium2's text page); the pages ``scans`` rendered at ``ocr.DPI`` and
    read by OCR instead, their lines put in ``laid`` (so their headings are found as a digital page's are).
    Returns (OCR confidence by page read, lines by page)."""
    import pypdfium2 as pdfium

    if scans:
        meter.ocr_pages(len(scans))
        engine.check(languages)
    scale = engine.DPI / 72
    confidence: dict[int, float] = {}
    lines: dict[int, list[boxes.Line]] = {}
    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        if "password" in str(e).lower():  # (pypdf opened it; PDFium asks the password pypdf's decryption did not need)
            raise UnreadableDocumentError(f"{name}: the PDF is encrypted; upload a copy without a password") from e
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable PDF ({e})") from e
    try:
        for n in range(1, len(laid) + 1):
            page = doc[n - 1]
            width, height = page.get_size()
            if n not in scans:
                lines[n] = boxes.pdf_lines(page.get_textpage(), width, height)
                continue
            meter.pixels(round(width * scale), round(height * scale), f"{name}, page {n} at {engine.DPI} dpi")
            read = engine.read(page.render(scale=scale, grayscale=True).to_pil(), languages)
            laid[n - 1] = structure.from_ocr(read, height)
            confidence[n], lines[n] = round(read.confidence, 3), boxes.ocr_lines(read)
            meter.count("pages")
    finally:
        doc.close()
    return confidence, lines
