"""PDF: the text of each page (pypdf), cited as ``page`` (1-based)."""

from __future__ import annotations

import io
from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            raise UnreadableDocumentError(f"{name}: the PDF is encrypted; upload a copy without a password")
        meter.whole("pages", len(reader.pages))
        pages = []
        for n, page in enumerate(reader.pages, 1):
            pages.append((n, (page.extract_text() or "").strip()))
            meter.count("pages")
    except UnreadableDocumentError:
        raise
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError, IndexError) as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable PDF ({type(e).__name__}: {e})") from e
    parts = [Part(text, {"page": n}) for n, text in pages if text]
    if not parts:
        raise UnreadableDocumentError(
            f"{name}: the PDF has {len(pages)} page(s) but no extractable text (a scan? it needs OCR first)")
    return parts
