"""Small-to-big: match on small chunks, hand the model the complete passage around them.

``contextExpansion``:
- ``none``: each hit is its own passage (its chunk's text);
- ``neighbors``: the hit plus ``expansionNeighbors`` chunks before and after it in its document;
- ``section``: the hit's enclosing section by heading path: chunks of its own (deepest) section
  first, then those sharing a shorter path, up to its ``##`` section (the whole document when it
  has no headings), nearest first.

Hits from one document become one passage: their chunks and the expansion around them, in
document order. Every hit is kept (expansion only ever adds to what ``none`` would give); then
surrounding chunks, nearest first, while the passage stays within ``maxPassageChars`` and, given a
context budget, within what is left of it once every later passage's own hits are counted: the
best passages grow first, and no hit loses its place to another's surroundings. A gap between
kept chunks is shown as ``[…]``. Chunks
overlapping their neighbour (``chunkOverlap``) are joined without repeating the overlap, and a
heading path a Markdown chunk repeats is shown once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddi_rag.common import citations
from eddi_rag.stores import filters
from eddi_rag.stores.base import Chunk, KnowledgeStore, SearchHit, position

MODES = ("none", "neighbors", "section")
SECTION_WINDOW = 64  # chunks either side of a hit considered for its section
MIN_OVERLAP = 10  # shorter common runs between neighbours are not treated as chunkOverlap
GAP = "\n\n[…]\n\n"


@dataclass
class Passage:
    """What reaches the model for one document: its hits (best first) and the chunks injected."""

    hits: list[SearchHit]
    chunks: list[Chunk] = field(default_factory=list)  # in document order once filled
    text: str = ""
    candidates: list[Chunk] = field(default_factory=list, repr=False)  # what it may grow by, best first
    max_chars: int = 12000
    overlap: int = 0
    end: int | None = None  # the document's last position, when the chunks fetched around the hits reached it
    offsets: dict[str, tuple[int, int]] = field(default_factory=dict)  # each chunk's [start, end) within ``text``

    @property
    def best(self) -> SearchHit:
        return self.hits[0]

    @property
    def whole(self) -> bool:
        """Every chunk of its document is in it."""
        return self.end is not None and sorted(position(c) for c in self.chunks) == list(range(self.end + 1))

    @property
    def covers(self) -> str | None:
        """What of its document it holds, as its label says (``pages 1–3``, ``§2 Billing – §3 Support``)."""
        return citations.span([c.metadata for c in self.chunks] or [self.best.metadata], self.whole)

    @property
    def label(self) -> str:
        """Its document, what of it it holds and where its best match is (``handbook.pdf, pages 1–3; match: p. 2``;
        the grammar: ``common.citations``)."""
        covers = self.covers
        place = citations.at(self.best.metadata) if len(self.chunks) > 1 else None
        if place and place != covers:
            covers = f"{covers}; match: {place}" if covers else f"match: {place}"
        return citations.labelled(self.best.metadata, covers)

    def offsets_of(self, chunk_id: str) -> list[int] | None:
        """Where a chunk stands within ``text``: [start, end) characters."""
        found = self.offsets.get(chunk_id)
        return list(found) if found else None

    def hit_offsets(self) -> list[dict[str, Any]]:
        """Each hit, where it stands within ``text`` and its own citation."""
        return [{"id": h.id, "offsets": self.offsets_of(h.id), "citation": citations.source_label(h.metadata)}
                for h in self.hits]

    @property
    def span(self) -> list[int]:
        """First and last ``position_in_doc`` injected."""
        positions = [position(c) for c in self.chunks] or [position(h) for h in self.hits]
        return [min(positions), max(positions)]

    def to_json(self) -> dict[str, Any]:
        return {"text": self.text, "source": self.best.metadata.get("source"), "citation": self.label,
                "covers": self.covers, "hits": [h.id for h in self.hits], "hitOffsets": self.hit_offsets(),
                "chunks": [c.id for c in self.chunks], "span": self.span}


def _path(item: Chunk | SearchHit) -> tuple[str, ...]:
    section = item.metadata.get("section")
    return tuple(section.split(" > ")) if isinstance(section, str) and section else ()


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _join(chunks: list[Chunk], overlap: int) -> tuple[str, dict[str, tuple[int, int]]]:
    """Chunk texts in document order: overlap with the previous chunk dropped, a repeated heading
    path prefix dropped, ``[…]`` where positions skip; and where each chunk stands in the result."""
    out = ""
    offsets: dict[str, tuple[int, int]] = {}
    prev: Chunk | None = None
    for chunk in chunks:
        text = chunk.text.strip()
        if prev is None:
            start, out = 0, text
        elif position(chunk) != position(prev) + 1:
            start = len(out) + len(GAP)
            out += GAP + text
        else:
            section = chunk.metadata.get("section")
            if section and section == prev.metadata.get("section") and text.startswith(section):
                text = text[len(section):].lstrip("\n")
            shared = _overlap(prev.text.strip(), text, overlap)
            start = len(out) - shared if shared else len(out) + 2
            out += text[shared:] if shared else "\n\n" + text  # overlapping chunks: the original text again
        offsets[chunk.id] = (start, len(out))
        prev = chunk
    return out, offsets


def _overlap(before: str, after: str, limit: int) -> int:
    for k in range(min(len(before), len(after), limit), MIN_OVERLAP - 1, -1):
        if before.endswith(after[:k]):
            return k
    return 0


def group_by_document(hits: list[SearchHit]) -> list[list[SearchHit]]:
    """Hits grouped by document, groups in the order of their best hit, hits best first."""
    groups: dict[Any, list[SearchHit]] = {}
    for hit in hits:
        groups.setdefault(hit.metadata.get("document_id", hit.id), []).append(hit)
    return list(groups.values())


def gather(store: KnowledgeStore, hits: list[SearchHit], mode: str, *, neighbors: int = 4, max_chars: int = 12000,
           overlap: int = 0, where: filters.Where = None, recheck: filters.Node | None = None) -> list[Passage]:
    """One passage per document among ``hits`` (ordered by their best hit), holding its hits' chunks
    and, as ``candidates``, the chunks it may grow by, best first. ``where`` scopes the chunks
    fetched around the hits (the same user and expiry scope as the search)."""
    if mode not in MODES:
        raise ValueError(f"contextExpansion {mode!r} is not supported; use one of {', '.join(MODES)}")
    if mode == "none":
        return [Passage([h], [Chunk(h.id, h.text, h.metadata)], max_chars=max_chars, overlap=overlap) for h in hits]
    passages = []
    reach = neighbors if mode == "neighbors" else SECTION_WINDOW
    groups = []  # (hits of one document, their positions, the document's chunks within reach of them)
    for group in group_by_document(hits):
        document, positions = group[0].metadata.get("document_id"), [position(h) for h in group]
        around = filters.parse({"document_id": document, "position_in_doc": {
            "$gte": min(positions) - reach, "$lte": max(positions) + reach}}) if document else None
        groups.append((group, positions, around))
    # every group's surroundings in one read (a round trip per document was most of a served store's expansion)
    wanted = [around for _, _, around in groups if around is not None]
    own = filters.node(where)
    either = wanted[0] if len(wanted) == 1 else filters.Or(tuple(wanted))
    around_all = [c for c in store.get(where=filters.And((either, own)) if own else either)
                  if recheck is None or filters.matches(recheck, c.metadata)] if wanted else []
    for group, positions, around in groups:
        fetched = {c.id: c for c in around_all if filters.matches(around, c.metadata)} if around is not None else {}
        chunks = [fetched.get(h.id) or Chunk(h.id, h.text, h.metadata) for h in group]
        candidates = [c for c in fetched.values() if c.id not in {h.id for h in group}]
        reached = max((position(c) for c in fetched.values()), default=None)
        end = reached if reached is not None and reached < max(positions) + reach else None
        order: Callable[[Chunk], tuple[int, ...]]
        if mode == "neighbors":
            candidates = [c for c in candidates if min(abs(position(c) - p) for p in positions) <= neighbors]
            order = lambda c: (min(abs(position(c) - p) for p in positions), position(c))  # noqa: E731
        else:
            paths = [_path(h) for h in group]
            floor = [min(2, len(p)) for p in paths]  # never above the hit's ## section
            candidates = [c for c in candidates if any(_common(_path(c), p) >= f for p, f in zip(paths, floor))]
            order = lambda c: (-max(_common(_path(c), p) for p in paths),  # noqa: E731
                               min(abs(position(c) - p) for p in positions), position(c))
        passages.append(Passage(group, chunks, candidates=sorted(candidates, key=order), max_chars=max_chars,
                                overlap=overlap, end=end))
    return passages


def fill(passages: list[Passage], total_chars: int | None = None) -> list[Passage]:
    """Grow each passage, in order, by its candidates (nearest first, until one does not fit) within
    its ``max_chars`` and, when ``total_chars`` is given, within what the passages after it still
    need for their own hits, so every hit keeps its place in the context."""
    sizes = [sum(len(c.text) for c in p.chunks) for p in passages]
    used = 0
    for i, p in enumerate(passages):
        room = p.max_chars
        if total_chars is not None:
            room = min(room, total_chars - used - sum(sizes[i + 1:]))
        size = sizes[i]
        for chunk in p.candidates:
            if size + len(chunk.text) > room:
                break
            p.chunks.append(chunk)
            size += len(chunk.text)
        p.chunks.sort(key=position)
        p.text, p.offsets = _join(p.chunks, p.overlap)
        used += size
    return passages


def expand(store: KnowledgeStore, hits: list[SearchHit], mode: str, *, neighbors: int = 4, max_chars: int = 12000,
           overlap: int = 0, where: filters.Where = None, total_chars: int | None = None) -> list[Passage]:
    """``gather`` then ``fill``: the passages that reach the model for ``hits``."""
    return fill(gather(store, hits, mode, neighbors=neighbors, max_chars=max_chars, overlap=overlap, where=where),
                total_chars)
