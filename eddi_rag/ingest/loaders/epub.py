"""EPUB (ebooklib): each document of the book's reading order (its spine) as Markdown, so its headings give the
``section`` path, cited as ``chapter`` (1-based, in reading order) too; counted as pages."""

from __future__ import annotations

import io
from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError
from eddi_rag.ingest.loaders.html import check_depth, to_markdown


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    import ebooklib
    from ebooklib import epub

    try:
        book = epub.read_epub(io.BytesIO(data), {"ignore_ncx": True})
    except Exception as e:  # noqa: BLE001 - a bad zip, lxml's errors on a broken package: the file's problem
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable EPUB ({type(e).__name__}: {e})") from e
    parts: list[Part] = []
    chapter = 0
    for idref, _ in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        meter.count("pages")
        # the chapter as the file holds it: ebooklib's get_content() rewrites it through lxml, which drops a text
        # node over 10 MB and left a 200 MB chapter "empty"; a chapter's size is held to the document's limit instead
        html = (item.content if isinstance(item.content, bytes) else item.get_content()).decode("utf-8", "replace")
        meter.characters(len(html))
        check_depth(html, name)
        text = to_markdown(html)
        chapter += 1
        if text.strip():
            parts.append(Part(text, {"chapter": chapter}, markdown=True))
    return parts
