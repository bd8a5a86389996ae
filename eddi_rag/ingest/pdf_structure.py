"""A digital PDF's own structure, so a PDF's chunks know their section as Markdown's do: each page's text runs
(pypdf's visitor: text, font size, position, font), grouped into lines in the order the page draws them (a
two-column page: column by column), then

- **headings**: the PDF's outline (bookmarks) where it names a line of the page, else lines set clearly larger
  than the body text (a level per size, the largest first), else short bold lines numbered like ``2.3 Setup``;
- **running headers and footers** left out: lines in the top or bottom margin that repeat on at least half of
  the pages (digits aside), page numbers (``3``, ``Page 3 of 9``, ``3/9``), and on a single page the margin's
  small print; a page of nothing else keeps them;
- **paragraphs** joined, a word hyphenated at a line's end joined again, ligatures (ﬁ, ﬂ) spelled out;
- **code**: consecutive lines set in a monospaced font (Courier, a "Mono" face, Consolas …) kept line by line in a
  fenced block, as a Markdown file's code is (unless nearly all the document is set so: then it is its text).

Each page becomes Markdown (``#`` per level) with the heading path in force where it begins, so a section that
runs over a page break keeps its path (``loaders.Part.headings``)."""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

MARGIN = 0.06  # the top and bottom share of a page where running headers and footers live (1.8 cm of A4)
LARGER = 1.15  # a line this much larger than the body text is a heading
MAX_HEADING_WORDS = 15
_PAGE_NUMBER = re.compile(r"^(?:page\s+)?\d{1,5}(?:\s*(?:/|of)\s*\d{1,5})?$|(?:^|\s)\d{1,5}\s*/\s*\d{1,5}$", re.I)
_NUMBERED = re.compile(r"^(\d{1,2}(?:\.\d{1,2}){0,4})\.?\s+\S")
_HYPHENATED = re.compile(r"(?<=[a-zà-ÿ])\s?[-\u2010\u00ad]$")  # a word hyphenated at a line's end
_MONOSPACED = re.compile(r"courier|mono|consol|menlo|inconsolata|code|typewriter", re.I)  # a font's name


@dataclass
class Line:
    text: str
    size: float
    y: float
    bold: bool | None  # None: not known (a line read by OCR)
    mono: bool = False  # set in a monospaced font (code)

    @property
    def key(self) -> str:
        """The line as it repeats from page to page: digits aside, spaces collapsed."""
        return re.sub(r"\d+", "#", " ".join(self.text.split())).lower()


@dataclass
class Page:
    lines: list[Line] = field(default_factory=list)
    height: float = 792.0


def normal(text: str) -> str:
    """Ligatures and compatibility forms spelled out (ﬁ → fi), as people type them in a question."""
    return unicodedata.normalize("NFKC", text)


def read_page(page: Any) -> Page:
    """The page's lines in drawing order, each with its font size in points and its height on the page."""
    out = Page(height=float(page.mediabox.height))
    current: list[tuple[str, float, float, bool, bool]] = []

    def close() -> None:
        text = "".join(t for t, *_ in current).rstrip()
        if text.strip():
            weight = Counter({s: len(t) for t, s, *_ in current})
            mono = all(m for *_, m in current)
            out.lines.append(Line(normal(text if mono else text.strip()), weight.most_common(1)[0][0], current[0][2],
                                  all(b for _, _, _, b, _ in current), mono))
        current.clear()

    def visit(text: str, cm: list[float], tm: list[float], font: Any, size: float) -> None:
        if not text:
            return
        scale = math.hypot(tm[2], tm[3]) * math.hypot(cm[2], cm[3])
        y = tm[5] * cm[3] + cm[5]
        name = str((font or {}).get("/BaseFont", ""))
        bold, mono = "bold" in name.lower(), bool(_MONOSPACED.search(name))
        pieces = text.split("\n")
        for i, piece in enumerate(pieces):
            if current and abs(current[-1][2] - y) > 1.0:
                close()
            if piece.strip():
                current.append((piece, round(size * scale, 1), y, bold, mono))
            if i < len(pieces) - 1:
                close()

    page.extract_text(visitor_text=visit)
    close()
    return out


OCR_BODY = 10.0  # the size a line read by OCR in the page's body text is given
OCR_LARGER = 1.3  # an OCR line set this much taller than the page's typical line is larger (its size: half steps)
OCR_HEADING_WORDS = 10  # at most this many words in a heading read by OCR


def from_ocr(read: Any, height: float) -> Page:
    """A page read by OCR (``ingest.ocr.OcrPage``) as a page of lines, ``height`` points tall, so a scan's headings,
    running lines and paragraphs are found as a digital page's are. A line's size is its tallest word against the
    page's typical line (the median of the lines' tallest words): a scan turned by a degree makes a long line's box
    taller, never a word's. Body text is ``OCR_BODY``; a short line ``OCR_LARGER`` times taller or more is set larger,
    in half steps."""
    scale = height / read.height if read.height else 1.0
    lines = [line for line in read.lines if line.text.strip() and line.word_heights]
    tallest = sorted(max(line.word_heights) for line in lines)
    typical = tallest[len(tallest) // 2] if tallest else 1
    page = Page(height=height)
    for line in lines:
        ratio = max(line.word_heights) / typical
        larger = ratio >= OCR_LARGER and len(line.text.split()) <= OCR_HEADING_WORDS
        size = OCR_BODY * round(ratio * 2) / 2 if larger else OCR_BODY
        page.lines.append(Line(normal(line.text), size, height - line.box[3] * scale, None))
    return page


def _in_margin(line: Line, page: Page) -> bool:
    return line.y > page.height * (1 - MARGIN) or line.y < page.height * MARGIN


def body_size(pages: list[Page]) -> float:
    """The font size most of the text is set in (0 for pages without text)."""
    sizes: Counter[float] = Counter()
    for page in pages:
        for line in page.lines:
            sizes[line.size] += len(line.text)
    return sizes.most_common(1)[0][0] if sizes else 0.0


def without_running_lines(pages: list[Page]) -> list[Page]:
    """The pages without their running headers, footers and page numbers."""
    body = body_size(pages)
    repeated = Counter(line.key for page in pages for line in {ln.key: ln for ln in page.lines if _in_margin(ln, page)}.values())
    often = {key for key, n in repeated.items() if len(pages) >= 2 and n >= max(2, len(pages) / 2)}
    for page in pages:
        kept = [line for line in page.lines if not _in_margin(line, page) or not (
            line.key in often or _PAGE_NUMBER.search(line.text.strip()) or (len(pages) == 1 and line.size < body))]
        page.lines = kept or page.lines  # a header runs beside a page's text: a page of nothing else keeps its lines
    return pages


def outline_titles(reader: Any) -> dict[int, list[tuple[str, int]]]:
    """The outline's (normalised title, level) entries by 1-based page number."""
    out: dict[int, list[tuple[str, int]]] = {}

    def walk(entries: list[Any], level: int) -> None:
        for entry in entries:
            if isinstance(entry, list):
                walk(entry, level + 1)
                continue
            try:
                number = reader.get_destination_page_number(entry) + 1
            except Exception:  # noqa: BLE001 - an outline entry pointing nowhere names no page
                continue
            out.setdefault(number, []).append((_comparable(str(entry.title)), level))

    try:
        walk(reader.outline, 1)
    except Exception:  # noqa: BLE001 - a broken outline is no outline
        return {}
    return out


def _comparable(text: str) -> str:
    return " ".join(normal(text).split()).lower()


def to_markdown(pages: list[Page], outline: dict[int, list[tuple[str, int]]]) -> list[tuple[str, tuple[str, ...]]]:
    """Each page as Markdown, with the heading path in force where it begins."""
    body = body_size(pages)
    larger = sorted({line.size for page in pages for line in page.lines
                     if line.size >= body * LARGER and len(line.text.split()) <= MAX_HEADING_WORDS}, reverse=True)
    level_of_size = {size: min(6, i + 1) for i, size in enumerate(larger)}
    path: list[tuple[int, str]] = []  # (level, "## Title")
    out = []
    every = [line for page in pages for line in page.lines]
    code_apart = sum(line.mono for line in every) < 0.9 * len(every)  # (a document set in a monospaced font is no code)
    for number, page in enumerate(pages, 1):
        titles = dict(outline.get(number, []))
        carried = tuple(heading for _, heading in path)
        blocks: list[str] = []
        paragraph: list[str] = []
        code: list[str] = []
        last_y: float | None = None
        gaps = [a.y - b.y for a, b in zip(page.lines, page.lines[1:]) if 0 < a.y - b.y < 40]
        spacing = sorted(gaps)[len(gaps) // 2] if gaps else 14.0

        def flush() -> None:
            if paragraph:
                text = " ".join(paragraph)
                blocks.append("\\" + text if text.startswith("#") else text)  # a line of text, not a heading
                paragraph.clear()
            if code:
                blocks.append("```\n" + "\n".join(code) + "\n```")
                code.clear()

        for line in page.lines:
            if line.mono and code_apart:  # code: kept line by line
                if paragraph:
                    flush()
                code.append(line.text.replace("```", "`\u200b``"))
                last_y = line.y
                continue
            if code:
                flush()
            level = _heading_level(line, titles, level_of_size, body, len(larger))
            if level:
                flush()
                heading = f"{'#' * level} {' '.join(line.text.split())}"
                blocks.append(heading)
                path = [(lv, h) for lv, h in path if lv < level] + [(level, heading)]
                last_y = line.y
                continue
            if last_y is not None and (last_y - line.y > spacing * 1.6 or line.y > last_y):
                flush()  # a gap wider than a line, or the next column
            text = " ".join(line.text.split())
            if paragraph and (cut := _HYPHENATED.search(paragraph[-1])) and text[:1].islower():
                paragraph[-1] = paragraph[-1][:cut.start()] + text  # a word hyphenated at the line's end
            else:
                paragraph.append(text)
            last_y = line.y
        flush()
        out.append(("\n\n".join(blocks), carried))
    return out


def _heading_level(line: Line, titles: dict[str, int], level_of_size: dict[float, int], body: float, size_levels: int) -> int:
    words = len(line.text.split())
    if words > MAX_HEADING_WORDS or line.text.rstrip()[-1:] in ".,;:":
        return 0
    if (level := titles.get(_comparable(line.text))) is not None:
        return min(6, level)
    if line.size in level_of_size:
        return level_of_size[line.size]
    numbered = _NUMBERED.match(line.text)
    if numbered and ((line.bold and abs(line.size - body) < 0.5) or (line.bold is None and line.size > body)):
        return min(6, size_levels + numbered.group(1).count(".") + 1)
    return 0
