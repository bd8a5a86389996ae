"""Where a chunk came from, as a citation names it: ``rapport.pdf, page 3``,
``production.xlsx, Stocks!C12``, ``deck.pptx, slide 4``, ``data.csv, rows 12-14``,
``guide.md, # Guide > ## Refunds``, ``mail.eml > report.pdf, page 2``; and what a passage of several chunks covers,
in the document's own terms, with where its best match is: ``handbook.pdf, pages 1–3; match: p. 2``,
``data.csv, rows 2–40; match: rows 12-14``, ``terms.docx, §2 Billing – §3 Support; match: §3 Support``,
``notes.txt, whole document`` (a document without pages, rows or headings).

The label grammar (``[Source n: <label>]``): ``<document>[ > <attachment>][, <what the passage covers>][; match: <place>]``
where a place is ``p. N``, ``slide N``, ``Sheet!C12``, ``rows A-B``, ``row N`` or ``§<heading>``."""

from __future__ import annotations

from typing import Any


def location(m: dict[str, Any]) -> str | None:
    """The place inside the document, from the chunk's citation metadata; None when unknown."""
    if m.get("sheet") is not None:
        cell = m.get("cell") or m.get("cells")
        return f"{m['sheet']}!{cell}" if cell else f"{m['sheet']}, row {m.get('row')}"
    if m.get("page") is not None:
        return f"page {m['page']}"
    if m.get("slide") is not None:
        return f"slide {m['slide']}"
    if m.get("rows"):
        return f"rows {m['rows']}"
    if m.get("row") is not None:
        return f"row {m['row']}"
    if isinstance(m.get("sections"), list) and m["sections"]:  # a whole document in one chunk, knowing its sections
        spanned = f"§{m['sections'][0]} – §{m['sections'][-1]}"
        return f"{m['section']}, {spanned}" if m.get("section") else spanned
    return m.get("section") or m.get("cell") or (f"chapter {m['chapter']}" if m.get("chapter") else None)


def within(m: dict[str, Any]) -> str | None:
    """The place inside the document as its chunks list shows it: a mail attachment's name first
    (``report.pdf, page 2``); None when unknown."""
    where = location(m)
    if m.get("attachment"):
        return f"{m['attachment']}, {where}" if where else str(m["attachment"])
    return where


def place(m: dict[str, Any]) -> dict[str, Any]:
    """Where on its page a chunk is, when known: {page, boxes} (boxes: [left, top, right, bottom] as fractions of
    the page, origin top left; ``ingest.boxes``), and ``attachment`` when the page is a mail attachment's."""
    if m.get("page") is None or not m.get("boxes"):
        return {}
    return {"page": m["page"], "boxes": m["boxes"], **({"attachment": m["attachment"]} if m.get("attachment") else {})}


def source_label(m: dict[str, Any]) -> str:
    """The document, and where in it when known."""
    return labelled(m, location(m))


def labelled(m: dict[str, Any], where: str | None) -> str:
    """The document a chunk with metadata ``m`` comes from (a mail's attachment inside it: ``mail.eml > a.pdf``),
    and ``where`` in it when known."""
    source = str(m.get("source") or "unknown source")
    if m.get("attachment"):
        source = f"{source} > {m['attachment']}"
    return f"{source}, {where}" if where else source


def _spread(values: list[int], one: str, many: str) -> str:
    low, high = min(values), max(values)
    return f"{one} {low}" if low == high else f"{many} {low}–{high}"


def _rows(m: dict[str, Any]) -> list[int]:
    """The row numbers a chunk's ``rows`` ("12-14", all it holds) or else its ``row`` name."""
    out = [int(part) for part in str(m.get("rows") or "").replace("–", "-").split("-") if part.strip().isdigit()]
    if not out and isinstance(m.get("row"), int) and not isinstance(m.get("row"), bool):
        return [m["row"]]
    return out


def at(m: dict[str, Any]) -> str | None:
    """A chunk's place as a model cites it: ``p. 2``, ``slide 4``, ``Stocks!C12``, ``rows 12-14``, ``§Refunds``."""
    if m.get("sheet") is not None or m.get("slide") is not None or m.get("rows") or m.get("row") is not None:
        return location(m)
    if m.get("page") is not None:
        return f"p. {m['page']}"
    if m.get("section"):
        return "§" + _heading(str(m["section"]).split(" > ")[-1])
    return None


def _heading(part: str) -> str:
    return part.lstrip("#").strip()


def span(metas: list[dict[str, Any]], whole: bool = False) -> str | None:
    """What a passage made of chunks with these citation metadata covers, as its label says it, in the document's
    own terms: ``pages 1–3``, ``slides 2–4``, ``Stocks, rows 2–40``, the heading path the chunks share (or
    ``§A – §B`` when they share none); ``whole`` (every chunk of its document) with none of these: ``whole
    document``; one chunk: its own ``location``."""
    if len(metas) == 1 and not whole:
        return location(metas[0])
    described = _described(metas)
    return described if described is not None or not whole else "whole document"


def _described(metas: list[dict[str, Any]]) -> str | None:
    """What chunks cover; chunks of a mail's body and of its attachments each in their own terms (``# Quarterly
    report + report.pdf, pages 1–2``: the body has no pages of its attachment's)."""
    inside = list(dict.fromkeys(m.get("attachment") for m in metas))
    if len(inside) == 1:
        return _described_alike(metas)
    out = []
    for attachment in inside:
        what = _described_alike([m for m in metas if m.get("attachment") == attachment])
        out.append(what if attachment is None else f"{attachment}, {what}" if what else str(attachment))
    return " + ".join(w for w in out if w) or None


def _described_alike(metas: list[dict[str, Any]]) -> str | None:
    for key, one, many in (("page", "page", "pages"), ("slide", "slide", "slides")):
        values = [m[key] for m in metas if isinstance(m.get(key), int) and not isinstance(m.get(key), bool)]
        if values:
            return _spread(values, one, many)
    rows = [r for m in metas for r in _rows(m)]
    if rows:
        sheets = {m["sheet"] for m in metas if m.get("sheet") is not None}
        where = _spread(rows, "row", "rows")
        return f"{sheets.pop()}, {where}" if len(sheets) == 1 else where
    paths = [tuple(str(m["section"]).split(" > ")) for m in metas if m.get("section")]
    if not paths:
        return None
    shared = 0
    while shared < min(len(p) for p in paths) and len({p[shared] for p in paths}) == 1:
        shared += 1
    if shared:
        return " > ".join(paths[0][:shared])
    return f"§{_heading(paths[0][-1])} – §{_heading(paths[-1][-1])}"

