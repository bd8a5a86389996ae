"""HTML: the main content (``<main>``, ``<article>`` or the body, without scripts, styles,
navigation, headers, footers, asides and forms) converted to Markdown, so headings become the
section path. The page ``<title>`` heads it when the content has no ``<h1>``."""

from __future__ import annotations

from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError, decode_text

NOISE = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "iframe", "svg",
         "button", "dialog")


def to_markdown(html: str) -> str:
    from bs4 import BeautifulSoup
    from markdownify import markdownify

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(NOISE):
        tag.decompose()
    for tag in soup.select('[role="navigation"], [role="banner"], [role="contentinfo"], [aria-hidden="true"]'):
        tag.decompose()
    main = (soup.find("main") or soup.find(attrs={"role": "main"})  # type: ignore[call-overload]  # bs4 takes attrs=
            or soup.find("article") or soup.body or soup)
    text = markdownify(str(main), heading_style="ATX", bullets="-", strip=["img"]).strip()
    lines = [line.rstrip() for line in text.splitlines()]
    text = "\n".join(lines)
    while "\n\n\n" in text:
        text = text.replace("\n\n\n", "\n\n")
    if title and main.find("h1") is None:
        text = f"# {title}\n\n{text}"
    return text


MAX_DEPTH = 255  # elements nested deeper than libxml2's HTML parser reads (its own limit, 256)


def check_depth(html: str, name: str) -> None:
    """Refuse HTML nested deeper than MAX_DEPTH, found by libxml2 in milliseconds (Python's parsers
    take minutes and gigabytes on a few megabytes of nested elements)."""
    from lxml import etree

    parser = etree.HTMLParser(recover=True)
    etree.fromstring(html.encode("utf-8", "surrogatepass"), parser)
    # (libxml2 names a text node over 10 MB a resource limit too: that one Python's parser reads well)
    if any(e.type_name == "ERR_RESOURCE_LIMIT" and "depth" in e.message.lower() for e in parser.error_log):
        raise UnreadableDocumentError(f"{name}: the HTML nests elements more than {MAX_DEPTH} levels deep")


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    html = decode_text(data)
    check_depth(html, name)
    try:
        return [Part(to_markdown(html), markdown=True)]
    except RecursionError:
        raise UnreadableDocumentError(f"{name}: the HTML nests elements too deeply to read") from None
