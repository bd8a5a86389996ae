"""Where on its page a chunk came from, so a citation can show the spot.

A **box** is ``[left, top, right, bottom]`` as fractions (0..1) of the page's width and height, origin at the
page's top left corner, four decimals: independent of the resolution the page is shown at (draw it over an image
of the page as percentages). A chunk of a PDF page or an image keeps the boxes of the lines it was made from
(``boxes`` in its metadata, beside ``page``), lines one under the other merged into one box per block.

A page's lines come from pdfium's characters on a digital page (``pdf_lines``) and from the OCR engine's
line boxes on a scan (``ocr_lines``); a chunk is matched to the lines whose letters and digits it contains (in
order; spaces, hyphens and case aside, so lines joined into a paragraph or a word hyphenated at a line's end
still match), the largest run of neighbouring lines winning when a short line would match elsewhere too."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

Box = tuple[float, float, float, float]
Line = tuple[str, Box]  # a line's text and its box
MAX_BOXES = 50  # per chunk: a chunk spread wider is shown by its first ones
_NOT_ALNUM = re.compile(r"[\W_]+")


def _key(text: str) -> str:
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", text).lower())


def _fraction(left: float, top: float, right: float, bottom: float, width: float, height: float) -> Box:
    clip = lambda v: min(1.0, max(0.0, v))  # noqa: E731
    return (round(clip(left / width), 4), round(clip(top / height), 4), round(clip(right / width), 4),
            round(clip(bottom / height), 4))


def pdf_lines(textpage: Any, width: float, height: float) -> list[Line]:
    """A digital page's text lines as pdfium reads them (pypdfium2's text page: its characters, cut at the line
    breaks pdfium puts between lines), each with the box of its characters."""
    count = textpage.count_chars()
    text = textpage.get_text_range(0, count)
    lines: list[Line] = []
    start = 0
    for i in range(min(count, len(text)) + 1):
        if i < min(count, len(text)) and text[i] not in "\r\n":
            continue
        if (line := text[start:i]).strip():
            edges = [textpage.get_charbox(j) for j in range(start, i) if not text[j].isspace()]
            left, bottom = min(e[0] for e in edges), min(e[1] for e in edges)
            right, top = max(e[2] for e in edges), max(e[3] for e in edges)
            lines.append((line, _fraction(left, height - top, right, height - bottom, width, height)))
        start = i + 1
    return [(t, b) for t, b in lines if _key(t)]


def ocr_lines(page: Any) -> list[Line]:
    """A page read by OCR (``ingest.ocr.OcrPage``): its lines with their boxes as fractions of the image."""
    return [(line.text, _fraction(left, top, right, bottom, page.width, page.height))
            for line in page.lines if _key(line.text) for left, top, right, bottom in [line.box]]


def of_chunk(text: str, lines: list[Line] | tuple[Line, ...]) -> list[list[float]]:
    """The boxes of the lines ``text`` was made from (a chunk of the page those lines are on), merged per block."""
    chunk = _key(text)
    if not chunk or not lines:
        return []
    keys = [_key(line) for line, _ in lines]
    found = [i for i, key in enumerate(keys) if key and key in chunk]
    if not found:
        return []
    runs: list[list[int]] = [[found[0]]]
    for i in found[1:]:
        if i - runs[-1][-1] <= 2:
            runs[-1].append(i)
        else:
            runs.append([i])
    weight = lambda run: sum(len(keys[i]) for i in run)  # noqa: E731
    best = max(runs, key=weight)
    if len(runs) > 1 and weight(best) < 8:
        return []  # only short lines that match anywhere: no place is better than a wrong one
    return [list(b) for b in merged([lines[i][1] for i in best])][:MAX_BOXES]


def merged(boxes: list[Box]) -> list[Box]:
    """Boxes of lines one under the other (overlapping across, less than a line and a half apart) as one."""
    out: list[Box] = []
    for box in boxes:
        if out:
            last, height = out[-1], box[3] - box[1]
            across = min(last[2], box[2]) > max(last[0], box[0])
            if across and -height <= box[1] - last[3] < 1.5 * height:
                out[-1] = (min(last[0], box[0]), min(last[1], box[1]), max(last[2], box[2]), max(last[3], box[3]))
                continue
        out.append(box)
    return out
