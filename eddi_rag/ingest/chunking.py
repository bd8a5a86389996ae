"""Split a document into chunks, per ``chunkStrategy``.

- ``recursive``: langchain-text-splitters' recursive splitter (``chunkSize``/``chunkOverlap`` in characters).
- ``paragraph``: whole paragraphs packed up to ``chunkSize``; a paragraph longer than that is
  packed by sentences. No overlap (a paragraph is never cut to share it).
- ``sentence``: whole sentences (pysbd) packed up to ``chunkSize``, neighbours sharing trailing
  sentences up to ``chunkOverlap`` characters.
- ``markdown``: one chunk per ``#``/``##`` section when the document has two or more besides its
  title, however small (issue 45); a document without them whole while it fits the embedding
  model's token limit. A section too long is split at its ``###`` headings, what is still
  too long packed by paragraphs (never mid-paragraph unless one paragraph alone is too long). No
  overlap. Each chunk starts with its heading path (``# A > ## B``), also returned as ``section``.

Only a single unit (sentence, or a paragraph without sentence ends) longer than the limit is cut
inside, by the recursive splitter.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache, lru_cache
from typing import TYPE_CHECKING, Any

from eddi_rag.config import RagConfiguration
from eddi_rag.ingest import boxes, ocr
from eddi_rag.ingest.tokens import TokenBudget, budget_for

if TYPE_CHECKING:
    from eddi_rag.ingest.loaders import Part

STRATEGIES = ("recursive", "paragraph", "sentence", "markdown")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_HEADING_LINE = re.compile(r"^\s*#{1,6}\s")


def is_heading(line: str) -> bool:
    """Whether a line of Markdown is a heading (``## Refunds``): it names a section, it is no sentence."""
    return bool(_HEADING_LINE.match(line))


@dataclass(frozen=True)
class Piece:
    text: str
    section: str | None = None
    citation: dict[str, Any] = field(default_factory=dict)  # page, slide, sheet, row(s), cell(s) of its part


def split_text(text: str, config: RagConfiguration) -> list[str]:
    return [p.text for p in split_document(text, config)]


def fit_spec(config: RagConfiguration) -> dict[str, Any]:
    """Whether a text fits one chunk, as data (``parsing.fits_of`` makes the function table loaders call):
    ``{"chars": chunkSize}``, or for ``markdown`` the model's token budget."""
    return budget_for(config).spec() if config.chunkStrategy == "markdown" else {"chars": config.chunkSize}


def ocr_spec(config: RagConfiguration) -> dict[str, Any]:
    """How scans and images are read under ``config`` (``ocr``, ``ocrLanguages`` or its ``language``), as data for the
    parse process."""
    return {"mode": config.ocr, "languages": ocr.packs(config)[0]}


def split_parts(parts: list[Part], config: RagConfiguration, budget: TokenBudget | None = None) -> list[Piece]:
    """Chunk each part of a loaded file on its own (a chunk never spans two pages, slides or row
    groups) and give every chunk its part's citation. A Markdown part is chunked by ``markdown``
    as one text; under the other strategies it is first cut at every heading, so each chunk
    still knows its ``section``."""
    budget = budget or budget_for(config)
    out: list[Piece] = []
    for part in parts:
        if part.markdown and config.chunkStrategy == "markdown":
            pieces = _markdown(part.text, budget, part.headings)
        elif part.markdown:
            pieces = [Piece(p.text, " > ".join(s.path) or None) for s in markdown_sections(part.text, part.headings)
                      for p in split_document(s.text, config, budget)]
        elif part.headings:  # a page read by OCR inside a section the pages before it opened
            pieces = [Piece(p.text, " > ".join(part.headings)) for p in split_document(part.text, config, budget)]
        else:
            pieces = split_document(part.text, config, budget)
        out += [Piece(p.text, p.section, {**part.metadata, **p.citation, **_boxes(p.text, part)}) for p in pieces]
    return out


def _boxes(text: str, part: Part) -> dict[str, Any]:
    """Where on its page a chunk is (``ingest.boxes``), when its part knows its lines."""
    found = boxes.of_chunk(text, part.lines) if part.lines else []
    return {"boxes": found} if found else {}


@dataclass(frozen=True)
class Section:
    path: tuple[str, ...]  # ("# A", "## B")
    text: str  # from its heading line to the next heading


def markdown_sections(text: str, parent: tuple[str, ...] = ()) -> list[Section]:
    """The text cut at every heading (any level; not inside code blocks), each with its heading path (the text
    before the first heading: ``parent``, the path in force where the text begins)."""
    lines = text.split("\n")
    sections = _sections(_headings(text), 0, len(lines), parent, split_level=6)
    bodies = ("\n".join(lines[s.heading:s.end]).strip() for s in sections)
    return [Section(s.path, body) for s, body in zip(sections, bodies) if body]


def split_document(text: str, config: RagConfiguration, budget: TokenBudget | None = None) -> list[Piece]:
    strategy = config.chunkStrategy
    if strategy not in STRATEGIES:
        raise ValueError(f"chunkStrategy {strategy!r} is not supported; use one of {', '.join(STRATEGIES)}")
    if strategy == "markdown":
        return _markdown(text, budget or budget_for(config))
    size = config.chunkSize
    if strategy == "recursive":
        return [Piece(c) for c in _recursive(text, size, config.chunkOverlap, len)]
    fits = lambda s: len(s) <= size  # noqa: E731
    if strategy == "paragraph":
        return [Piece(c) for c in _paragraphs(paragraphs(text), fits, size, len)]
    units, seps = [], []
    for p in paragraphs(text):
        for n, unit in enumerate(_fitting(sentences(p), fits, size, len)):
            units.append(unit)
            seps.append(" " if n else "\n\n")
    return [Piece(c) for c in pack(units, fits, seps, overlap=config.chunkOverlap)]


# --- units -----------------------------------------------------------------------------


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in _PARAGRAPH_BREAK.split(text) if p.strip()]


# The language whose sentence rules split a document's text (``in_language``): pysbd's, for its 23 languages
# (German's "z. B.", Hindi's danda, Arabic's question mark); English's rules for any other (they also end a sentence at
# Chinese and Japanese 。！？).
_LANGUAGE: ContextVar[str | None] = ContextVar("sentence_language", default=None)


@contextmanager
def in_language(code: str | None) -> Iterator[None]:
    """Sentences split by the rules of language ``code`` (a document's, ISO 639-1) while inside."""
    token = _LANGUAGE.set(code)
    try:
        yield
    finally:
        _LANGUAGE.reset(token)


@cache
def _segmenter(code: str = "en"):
    import pysbd
    from pysbd.languages import LANGUAGE_CODES

    return pysbd.Segmenter(language=code if code in LANGUAGE_CODES else "en", clean=False)


# pysbd's time grows with the square of a paragraph's length (each abbreviation it finds is replaced over the whole
# text): a paragraph of 100,000 characters took 12 s, one of 150,000 without a full stop 23 s. A longer paragraph is
# split a window of about this many characters at a time (about 16 ms each here), the window's last sentence, which may go on
# past it, taken again as the start of the next.
SENTENCE_WINDOW = 3000


def _sentence_spans(text: str) -> list[tuple[int, str]]:
    """Where each of pysbd's sentences of ``text`` starts, and the sentence stripped. As ``Segmenter.segment`` keeps a
    sentence found in the text after the one before (``sentences_with_char_spans``), but found with ``str.find``: that
    method compiles a regular expression of each sentence, which made every paragraph cost a compile per sentence and
    pushed pysbd's own expressions out of ``re``'s cache (a third of the time splitting took)."""
    out, prior_end = [], 0
    for sent in _segmenter(_LANGUAGE.get() or "en").processor(text).process():
        if not sent.strip():
            continue
        at = text.find(sent)
        while at >= 0:
            end = at + len(sent)
            while end < len(text) and text[end].isspace():
                end += 1
            if end > prior_end:
                prior_end = end
                out.append((at, sent.strip()))
                break
            at = text.find(sent, end)
    return out


def sentences(paragraph: str) -> list[str]:
    """pysbd's sentences of ``paragraph``, stripped; a long paragraph a window at a time (``SENTENCE_WINDOW``). A
    sentence that alone fills a window comes in pieces cut at a space (it is longer than any chunk: ``_fitting`` cuts
    it anyway)."""
    out: list[str] = []
    start = 0
    while len(paragraph) - start > SENTENCE_WINDOW * 2:
        cut = start + SENTENCE_WINDOW
        while cut < len(paragraph) and not paragraph[cut].isspace():
            cut += 1
        spans = _sentence_spans(paragraph[start:cut])
        if len(spans) > 1:
            out += [sent for _, sent in spans[:-1]]
            start += spans[-1][0]  # the last sentence may go on: it starts the next window
        else:
            out += [sent for _, sent in spans]
            start = cut
    return out + [sent for _, sent in _sentence_spans(paragraph[start:])]


def _recursive(text: str, size: int, overlap: int, length: Callable[[str], int]) -> list[str]:
    from langchain_text_splitters import RecursiveCharacterTextSplitter  # (with langchain-core: 0.2 s, at the first split)

    splitter = RecursiveCharacterTextSplitter(chunk_size=size, chunk_overlap=overlap, length_function=length,
                                              strip_whitespace=True)
    return [c for c in splitter.split_text(text) if c.strip()]


def _fitting(units: list[str], fits: Callable[[str], bool], size: int, length: Callable[[str], int]) -> list[str]:
    """Units that fit, a unit that does not cut by the recursive splitter."""
    return [part for u in units for part in ([u] if fits(u) else _recursive(u, size, 0, length))]


def pack(units: list[str], fits: Callable[[str], bool], sep: str | list[str], overlap: int = 0,
         sized: tuple[Callable[[str], int], int] | None = None) -> list[str]:
    """Greedily join consecutive units while ``fits``; ``sep`` goes between units (a list gives the
    separator before each unit). Each new chunk repeats the previous chunk's trailing units
    totalling at most ``overlap`` characters. ``sized``: (size, room) when a join's size is the sum of its units'
    (tokens that add up over whitespace separators): each unit is measured once, instead of the growing join."""
    seps = [sep] * len(units) if isinstance(sep, str) else sep
    join = lambda idx: "".join((seps[i] if n else "") + units[i] for n, i in enumerate(idx))  # noqa: E731
    if sized is not None:
        size, room = sized
        sizes = [size(u) for u in units]
        together = lambda idx: sum(sizes[i] for i in idx) <= room  # noqa: E731
    else:
        together = lambda idx: fits(join(idx))  # noqa: E731
    chunks: list[str] = []
    current: list[int] = []
    for i in range(len(units)):
        if current and not together([*current, i]):
            chunks.append(join(current))
            kept: list[int] = []
            for j in reversed(current):
                if sum(len(units[k]) + 1 for k in kept) + len(units[j]) > overlap:
                    break
                kept.insert(0, j)
            current = kept if kept and together([*kept, i]) else []
        current.append(i)
    if current:
        chunks.append(join(current))
    return chunks


def _paragraphs(paras: list[str], fits: Callable[[str], bool], size: int, length: Callable[[str], int],
                sized: tuple[Callable[[str], int], int] | None = None) -> list[str]:
    """Paragraphs packed; one too long for a chunk on its own packed by its sentences (``sized``: see ``pack``)."""
    out: list[str] = []
    run: list[str] = []
    for p in paras:
        if fits(p):
            run.append(p)
            continue
        out += pack(run, fits, "\n\n", sized=sized)
        run = []
        out += pack(_fitting(sentences(p), fits, size, length), fits, " ", sized=sized)
    return out + pack(run, fits, "\n\n", sized=sized)


# --- markdown --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Section:
    path: tuple[str, ...]  # ("# A", "## B")
    start: int  # first content line, after the heading
    end: int
    heading: int  # the heading's first line (= start where there is no heading)


def _level(heading: str) -> int:
    return len(heading) - len(heading.lstrip("#"))


def _headings(text: str) -> list[tuple[int, int, int, str]]:
    """(first line, line after, level, title) of every heading; code blocks are not headings."""
    from markdown_it import MarkdownIt

    tokens = MarkdownIt("commonmark").parse(text)
    return [
        (tok.map[0], tok.map[1], int(tok.tag[1]), tokens[i + 1].content.strip())
        for i, tok in enumerate(tokens)
        if tok.type == "heading_open" and tok.map
    ]


def _sections(heads: list[tuple[int, int, int, str]], start: int, end: int, parent: tuple[str, ...],
              split_level: int) -> list[_Section]:
    """Cut lines [start, end) at headings of level <= split_level; the text before the first cut
    keeps ``parent`` as its path."""
    cuts = [h for h in heads if start <= h[0] < end and h[2] <= split_level]
    out = [_Section(parent, start, cuts[0][0] if cuts else end, start)]
    path = parent
    for i, (first, after, level, title) in enumerate(cuts):
        path = tuple(p for p in path if _level(p) < level) + ("#" * level + " " + title,)
        out.append(_Section(path, after, cuts[i + 1][0] if i + 1 < len(cuts) else end, first))
    return out


DEEPEST_CUT = 3  # sections are cut at ## and then ###; deeper headings stay inside their section


def _markdown(text: str, budget: TokenBudget, parent: tuple[str, ...] = ()) -> list[Piece]:
    text = text.strip()
    # a section without subsections is the same text at each level; a sentence is counted to see that it fits, then
    # packed (whole joins are never kept: ``pack`` counts those with ``budget.count``)
    count = lru_cache(maxsize=1024)(budget.count)
    heads = _headings(text)
    if count(_prefix(parent) + text) <= budget.limit and not _sectioned(heads):
        return [_opened(parent, text, heads) if parent else _whole(text, heads)]
    lines = text.split("\n")

    def split(section: _Section, level: int) -> list[Piece]:
        """The section whole if it fits, else its subsections cut at ``level``, else paragraphs."""
        body = "\n".join(lines[section.start : section.end]).strip()
        prefix = _prefix(section.path)
        if not body:
            return []
        if count(prefix + body) <= budget.limit:
            return [_piece(section.path, body)]
        if level <= DEEPEST_CUT:
            return [p for sub in _sections(heads, section.start, section.end, section.path, level) for p in split(sub, level + 1)]
        left, specials = budget.limit - count(prefix), budget.specials  # (tokens the prefix leaves)
        room = max(1, left)
        if specials is None:
            fits = lambda s: budget.count(prefix + s) <= budget.limit  # noqa: E731
            return [_piece(section.path, c) for c in _paragraphs(paragraphs(body), fits, room, budget.count)]
        # counts that add up (the local model's): each paragraph and sentence counted once, not every join again
        words = lambda s: count(s) - specials  # noqa: E731
        fits = lambda s: words(s) <= left  # noqa: E731
        return [_piece(section.path, c) for c in _paragraphs(paragraphs(body), fits, room, count, (words, left))]

    return [p for section in _sections(heads, 0, len(lines), parent, split_level=2) for p in split(section, 3)]


def _sectioned(heads: list[tuple[int, int, int, str]]) -> bool:
    """Whether a text that fits whole has sections to be its chunks' units (issue 45): two or more ``#``/``##``
    headings besides a title that opens it (a 4-section DOCX is four chunks, each cited to its section, not one)."""
    cuts = [h for h in heads if h[2] <= 2]
    if cuts and cuts[0][0] == 0 and all(h[2] > cuts[0][2] for h in cuts[1:]):  # the title: not a section of its own
        cuts = cuts[1:]
    return len(cuts) >= 2


def _opened(parent: tuple[str, ...], text: str, heads: list[tuple[int, int, int, str]]) -> Piece:
    """A whole part (a PDF page) under the headings the parts before it opened: filed under its own first heading when
    it opens with one (a page beginning "## Travel" is no longer filed under the previous page's "## Leave");
    ``heads``: its headings (``_headings``)."""
    if not heads or heads[0][0] != 0:
        return _piece(parent, text)
    level, title = heads[0][2], heads[0][3]
    path = tuple(p for p in parent if _level(p) < level)
    return Piece(_prefix(path) + text, " > ".join((*path, "#" * level + " " + title)))


def _whole(text: str, heads: list[tuple[int, int, int, str]]) -> Piece:
    """A whole document in one chunk that knows its sections: a lone title heading is its ``section``, and the
    titles of the sections under it (the first level below the title) its citation's ``sections``, so its label
    names them (``handbook.docx, # Handbook, §Refunds – §Support``) although it was not cut; ``heads``: its
    headings (``_headings``). A lone heading right under the title (``<h1>Shuttle service</h1><h2>Night buses</h2>``,
    nothing between them) is on its path too: ``# Shuttle service > ## Night buses``."""
    if not heads:
        return Piece(text)
    top = min(level for _, _, level, _ in heads)
    titles = [h for h in heads if h[2] == top]
    section = None
    if len(titles) == 1 and titles[0][0] == 0:  # the title opens the (stripped) document
        path, heads, lines, opened = [f"{'#' * top} {titles[0][3]}"], [h for h in heads if h[2] > top], text.split("\n"), titles[0][1]
        while heads and len(alone := [h for h in heads if h[2] == min(x[2] for x in heads)]) == 1 and \
                not "".join(lines[opened:alone[0][0]]).strip():
            path.append(f"{'#' * alone[0][2]} {alone[0][3]}")
            opened, heads = alone[0][1], [h for h in heads if h[2] > alone[0][2]]
        section = " > ".join(path)
    names = [title for _, _, level, title in heads if level == min(h[2] for h in heads)] if heads else []
    return Piece(text, section, {"sections": names} if len(names) > 1 else {})


def _prefix(path: tuple[str, ...]) -> str:
    return " > ".join(path) + "\n\n" if path else ""


def _piece(path: tuple[str, ...], body: str) -> Piece:
    return Piece(_prefix(path) + body, " > ".join(path) or None)
