"""A page of a document's kept file as a PNG image, to show a citation's place on it (``ingest.boxes``): a PDF's
page rendered by pypdfium2, an image (a TIFF's page) scaled. Drawn like any read of an untrusted file: in the
limited parse process (``ingest.parsing.render``), the image's size checked against ``max_image_pixels`` first."""

from __future__ import annotations

import io

from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.loaders import Counter, UnreadableDocumentError

FORMATS = frozenset({"pdf", "image"})  # the formats whose pages can be shown
WIDTH = 900  # pixels, by default
MIN_WIDTH, MAX_WIDTH = 100, 2000


class PageNotFoundError(EddiRagError, LookupError):
    """No such page to show: a page number past the document's end, or a format without pages (HTTP 404)."""
    status = 404


def shown_width(width: int) -> int:
    """``width`` within [MIN_WIDTH, MAX_WIDTH]."""
    return max(MIN_WIDTH, min(MAX_WIDTH, int(width)))


def draw(fmt: str, data: bytes, name: str, page: int, width: int, meter: Counter) -> bytes:
    """Page ``page`` (1-based) of ``data`` (detected as ``fmt``) as a PNG ``width`` pixels wide."""
    if fmt not in FORMATS:
        raise PageNotFoundError(f"{name} is a {fmt} file: only the pages of a PDF or an image can be shown")
    width = shown_width(width)
    return _pdf(data, name, page, width, meter) if fmt == "pdf" else _image(data, name, page, width, meter)


def _missing(name: str, page: int, pages: int) -> PageNotFoundError:
    return PageNotFoundError(f"{name} has no page {page} (it has {pages})")


def _pdf(data: bytes, name: str, page: int, width: int, meter: Counter) -> bytes:
    import pypdfium2 as pdfium

    try:
        doc = pdfium.PdfDocument(data)
    except pdfium.PdfiumError as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable PDF ({e})") from e
    try:
        if not 1 <= page <= len(doc):
            raise _missing(name, page, len(doc))
        drawn = doc[page - 1]
        page_width, page_height = drawn.get_size()
        scale = width / page_width
        meter.pixels(width, round(page_height * scale), f"{name}, page {page} at {width} pixels wide")
        return _png(drawn.render(scale=scale).to_pil())
    finally:
        doc.close()


def _image(data: bytes, name: str, page: int, width: int, meter: Counter) -> bytes:
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None  # (our own limit, with its setting, is checked instead)
    image = Image.open(io.BytesIO(data))
    meter.pixels(*image.size, what=name)
    frames = getattr(image, "n_frames", 1)
    if not 1 <= page <= frames:
        raise _missing(name, page, frames)
    image.seek(page - 1)
    meter.pixels(*image.size, what=f"{name}, page {page}")
    frame = image.convert("RGB")
    return _png(frame.resize((width, max(1, round(frame.height * width / frame.width)))))


def _png(image: object) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=False)  # type: ignore[attr-defined]
    return out.getvalue()
