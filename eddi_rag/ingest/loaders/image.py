"""A photo, screenshot or scan of a page (PNG, JPEG, TIFF with one image per page, WebP, BMP), read by OCR
(``ingest.ocr``), each image cited as ``page`` (1-based) with the engine's confidence (``ocrConfidence``, 0..1).
Its size is checked as declared, before any pixel is decoded (``max_image_pixels``), and its pages before any is
read (``max_pages``, ``max_ocr_pages``). Its headings are found by size and numbering, running headers and footers
left out, as on a PDF's pages (``ingest.pdf_structure``); each chunk keeps its boxes on the image (``ingest.boxes``)."""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

from eddi_rag.errors import CONFIGURATION
from eddi_rag.ingest import boxes
from eddi_rag.ingest import ocr as engine
from eddi_rag.ingest import pdf_structure as structure
from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError


class OcrOffError(UnreadableDocumentError):
    """An image given to a knowledge base whose OCR is off: its configuration, not the file, is what to change."""
    failure = CONFIGURATION


PAGE_HEIGHT = 792.0  # an image's height in the units its lines' sizes are measured in (a Letter page's points)


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter, ocr: dict[str, Any]) -> list[Part]:
    from PIL import Image, ImageSequence, UnidentifiedImageError

    if ocr["mode"] == "off":
        raise OcrOffError(f"{name}: an image is read by OCR, and this knowledge base has ocr 'off'")
    Image.MAX_IMAGE_PIXELS = None  # (our own limit, with its setting, is checked below instead of Pillow's warning)
    try:
        image = Image.open(io.BytesIO(data))
        meter.pixels(*image.size, what=name)
        frames = getattr(image, "n_frames", 1)
        meter.whole("pages", frames)
        meter.ocr_pages(frames)
        engine.check(ocr["languages"])
        pages = []
        for n, frame in enumerate(ImageSequence.Iterator(image), 1):
            meter.pixels(*frame.size, what=f"{name}, page {n}")
            pages.append(engine.read(frame.convert("L"), ocr["languages"]))
            meter.count("pages")
    except UnreadableDocumentError:
        raise
    except (UnidentifiedImageError, OSError, ValueError, EOFError, SyntaxError) as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable image ({type(e).__name__}: {e})") from e
    laid = structure.without_running_lines([structure.from_ocr(page, PAGE_HEIGHT) for page in pages])
    parts = [Part(text, {"page": n, "ocrConfidence": round(page.confidence, 3)}, markdown=True, headings=carried,
                  lines=tuple(boxes.ocr_lines(page)))
             for n, ((text, carried), page) in enumerate(zip(structure.to_markdown(laid, {}), pages), 1) if text.strip()]
    if not parts:
        raise UnreadableDocumentError(f"{name}: OCR found no text in the image")
    return parts
