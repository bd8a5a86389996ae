"""HTML: the main content (``<main>``, ``<article>`` or the body, without scripts, styles,
navigation, headers, footers, asides and forms) converted to Markdown, so headings become the
section path. The page ``<title>`` heads it when the content has no ``<h1>``.

Text a reader of the page does not see is dropped before it can reach a model: comments, elements with the
``hidden`` attribute, and inline styles that hide (``display: none``, ``visibility: hidden``, ``font-size: 0``,
``opacity: 0``, a zero height or width with ``overflow: hidden``, ``color: transparent``, text the colour of its
background: the nearest background an ancestor sets, else the page's white). A stylesheet's classes are not
evaluated: text hidden by a class stays."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError, decode_text

NOISE = ("script", "style", "noscript", "template", "nav", "header", "footer", "aside", "form", "iframe", "svg",
         "button", "dialog")


DECLARATION = re.compile(r"([a-zA-Z-]+)\s*:\s*([^;]+)")
NAMED = {"white": "#ffffff", "black": "#000000"}
ZERO = re.compile(r"^\s*0(?:\.0*)?\s*(?:px|pt|em|rem|%|vh|vw)?\s*(?:!important)?\s*$")


def _style(tag: Any) -> dict[str, str]:
    style = tag.get("style") if hasattr(tag, "get") else None
    return {k.lower(): v.strip().lower() for k, v in DECLARATION.findall(style)} if isinstance(style, str) else {}


def _colour(value: str | None) -> str | None:
    """A CSS colour as #rrggbb (names white and black, #rgb, #rrggbb, rgb()); None: another."""
    if not value:
        return None
    value = value.replace("!important", "").strip()
    if value in NAMED:
        return NAMED[value]
    if re.fullmatch(r"#[0-9a-f]{3}", value):
        return "#" + "".join(c * 2 for c in value[1:])
    if re.fullmatch(r"#[0-9a-f]{6}", value):
        return value
    rgb = re.fullmatch(r"rgba?\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*(?:,\s*[\d.]+\s*)?\)", value)
    return "#" + "".join(f"{min(int(n), 255):02x}" for n in rgb.groups()) if rgb else None


def _background(tag: Any) -> str:
    """The colour behind ``tag``'s text: the nearest background an element (itself or an ancestor) sets, else white."""
    while tag is not None and hasattr(tag, "get"):
        style = _style(tag)
        found = _colour(style.get("background-color") or style.get("background", "").split(" ")[0])
        if found:
            return found
        tag = tag.parent
    return "#ffffff"


def hides(tag: Any) -> bool:
    """Whether ``tag``'s own attributes keep its text from a reader's eyes."""
    if tag.has_attr("hidden"):
        return True
    style = _style(tag)
    if not style:
        return False
    if style.get("display", "").startswith("none") or style.get("visibility", "").startswith(("hidden", "collapse")):
        return True
    if ZERO.match(style.get("font-size", "x")) or ZERO.match(style.get("opacity", "x").replace("%", "")):
        return True
    if style.get("overflow", "").startswith("hidden") and (ZERO.match(style.get("height", "x")) or ZERO.match(style.get("width", "x"))):
        return True
    colour = style.get("color")
    if colour is not None and colour.startswith("transparent"):
        return True
    return _colour(colour) is not None and _colour(colour) == _background(tag)


def drop_hidden(soup: Any) -> None:
    """Take out what a reader does not see (the module's docstring): comments and hidden elements, with their text."""
    from bs4 import Comment

    for comment in soup.find_all(string=lambda s: isinstance(s, Comment)):
        comment.extract()
    for tag in soup.find_all(hides):
        if not tag.decomposed:
            tag.decompose()


def to_markdown(html: str) -> str:
    from bs4 import BeautifulSoup
    from markdownify import markdownify

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else ""
    for tag in soup.find_all(NOISE):
        tag.decompose()
    drop_hidden(soup)
    for tag in soup.select('[role="navigation"], [role="banner"], [role="contentinfo"], [aria-hidden="true"]'):
        tag.decompose()
    articles = soup.find_all("article")
    outer = [a for a in articles if a.find_parent("article") is None]  # (an article inside another is read with it)
    main = (soup.find("main") or soup.find(attrs={"role": "main"})  # type: ignore[call-overload]  # bs4 takes attrs=
            or (outer[0] if len(outer) == 1 else None) or soup.body or soup)
    # several articles and no main: every one of them, in order (a page of posts, an EPUB chapter of poems)
    shown = "".join(str(a) for a in outer) if len(outer) > 1 and main in (soup.body, soup) else str(main)
    text = markdownify(shown, heading_style="ATX", bullets="-", strip=["img"]).strip()
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
