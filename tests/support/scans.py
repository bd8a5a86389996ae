"""Scans made the way an office scanner makes them, with real tools and nothing committed: Markdown rendered to
HTML (markdown-it), printed to PDF by headless Chromium, each page rasterised (pypdfium2) at 150 dpi, greyscale,
turned by under a degree, and saved as an image-only PDF or one image per page (Pillow). The digital PDF's own
text layer is the truth an OCR result is measured against."""

from __future__ import annotations

import io
import os
import subprocess
import tempfile
from pathlib import Path

CHROMIUM = os.environ.get("EDDI_RAG_CHROMIUM", "/usr/bin/chromium")
STYLE = "body{font-family:'DejaVu Sans',sans-serif;font-size:11pt;margin:2cm;line-height:1.35} pre,code{white-space:pre-wrap}"


def printed(markdown: str, title: str = "page") -> bytes:
    """``markdown`` as a digital PDF, printed by headless Chromium from its HTML."""
    from markdown_it import MarkdownIt

    html = f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title><style>{STYLE}</style></head>" \
           f"<body>{MarkdownIt('commonmark').enable('table').render(markdown)}</body></html>"
    with tempfile.TemporaryDirectory() as folder:
        source, out = Path(folder) / "page.html", Path(folder) / "page.pdf"
        source.write_text(html, encoding="utf-8")
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-pdf-header-footer",
                        f"--user-data-dir={folder}/profile", f"--print-to-pdf={out}", source.as_uri()],
                       check=True, capture_output=True, timeout=120)
        return out.read_bytes()


def page_texts(pdf: bytes) -> list[str]:
    """The text layer of each page of a digital PDF (pypdfium2)."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf)
    try:
        return [doc[i].get_textpage().get_text_bounded() for i in range(len(doc))]
    finally:
        doc.close()


def scanned_pages(pdf: bytes, dpi: int = 150, turn: float = 0.7) -> list:
    """Each page of ``pdf`` as a scanner sees it: a greyscale image at ``dpi``, turned by ``turn`` degrees."""
    import pypdfium2 as pdfium
    from PIL import Image

    doc = pdfium.PdfDocument(pdf)
    try:
        pages = []
        for i in range(len(doc)):
            image = doc[i].render(scale=dpi / 72).to_pil().convert("L")
            pages.append(image.rotate(turn, resample=Image.BICUBIC, expand=True, fillcolor=255))
        return pages
    finally:
        doc.close()


def image_pdf(pages: list, dpi: int = 150) -> bytes:
    """Images as an image-only PDF (no text layer), as a scanner writes one."""
    out = io.BytesIO()
    pages[0].save(out, format="PDF", resolution=dpi, save_all=True, append_images=pages[1:])
    return out.getvalue()


def png(page) -> bytes:
    out = io.BytesIO()
    page.save(out, format="PNG")
    return out.getvalue()
