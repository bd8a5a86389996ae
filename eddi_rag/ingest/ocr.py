"""Text from page images, offline: scans (PDF pages without a usable text layer) and photos or screenshots of a
page. The engine is Tesseract (Debian's ``tesseract-ocr`` and its language packs, ``tesseract-ocr-<lang>``),
run through pytesseract with one thread: measured on this project's 2-core machine against RapidOCR's PP-OCR
models (``benchmarks/bench_ocr.py``), it made a fifth of the errors on English, reads German, and needs a tenth of
the memory. Nothing is downloaded: a language whose pack is not installed is refused, naming the package.

A page's result keeps each line's box in the page image's pixels (origin top left) and the engine's confidence
(0..1, the mean over its words); ``ingest.loaders`` turn them into the part's citation metadata."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from eddi_rag.config import RagConfiguration
from eddi_rag.errors import DEPENDENCY
from eddi_rag.ingest.loaders import UnreadableDocumentError

MODES = ("auto", "always", "off")
DEFAULT_LANGUAGES = ("eng",)
MIN_TEXT_CHARS = 20  # a page whose text layer has fewer letters and digits than this is read as a scan (auto)
DPI = 200  # a PDF page is rendered at this resolution for OCR
LOW_CONFIDENCE = 0.7  # a page read with less is named in the ingestion's warnings (a clean 150-dpi scan: about 0.9)
MIN_ORIENTATION_CONFIDENCE = 2.0  # Tesseract's orientation confidence from which a page is turned (its own advice)


class OcrUnavailableError(UnreadableDocumentError):
    """OCR was needed, and the engine or a language pack is not installed on the server."""
    failure = DEPENDENCY


@dataclass
class OcrLine:
    text: str
    box: tuple[int, int, int, int]  # left, top, right, bottom in the image's pixels
    confidence: float  # 0..1
    word_heights: tuple[int, ...] = ()  # each word's height in pixels (how large the line is set)


@dataclass
class OcrPage:
    lines: list[OcrLine] = field(default_factory=list)
    width: int = 0
    height: int = 0
    rotated: int = 0  # degrees clockwise the page was turned to be read upright (read)

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    @property
    def confidence(self) -> float:
        """The mean of the lines' confidences, weighted by their length (0 for a page without text)."""
        weight = sum(len(line.text) for line in self.lines)
        return sum(line.confidence * len(line.text) for line in self.lines) / weight if weight else 0.0


def poorly_read(parts: list[Any], languages: list[str] | tuple[str, ...] = DEFAULT_LANGUAGES) -> str | None:
    """The warning for the pages OCR read with low confidence (each part's ``ocrConfidence``), naming the likely
    causes, or None. (A page scanned sideways or upside down is turned upright before this: ``read``.)"""
    pages = [p.metadata.get("page") for p in parts if p.metadata.get("ocrConfidence", 1.0) < LOW_CONFIDENCE]
    if not pages:
        return None
    return (f"OCR read page(s) {', '.join(map(str, pages))} with confidence below {LOW_CONFIDENCE}: their text may be "
            f"wrong. Likely causes: a blurred or low-resolution scan (300 dpi reads better), text in a language "
            f"ocrLanguages does not name (this knowledge base reads {'+'.join(languages)}), or handwriting")


def spec(mode: str = "auto", languages: list[str] | tuple[str, ...] = DEFAULT_LANGUAGES) -> dict[str, Any]:
    """The OCR settings a parse takes (a knowledge base's ``ocr`` / ``ocrLanguages``), as data for the parse process."""
    return {"mode": mode, "languages": list(languages)}


def installed_languages() -> set[str] | None:
    """The language packs Tesseract has (its ``tessdata`` folder: TESSDATA_PREFIX, else Debian's); None when
    Tesseract itself is not installed."""
    import pytesseract

    if shutil.which(pytesseract.pytesseract.tesseract_cmd) is None:
        return None
    folders = [Path(os.environ["TESSDATA_PREFIX"])] if os.environ.get("TESSDATA_PREFIX") else \
        sorted(Path("/usr/share/tesseract-ocr").glob("*/tessdata")) + [Path("/usr/share/tessdata")]
    return {f.stem for folder in folders for f in folder.glob("*.traineddata")} - {"osd"}


# ISO 639-1 (a knowledge base's ``language``) -> Tesseract's language pack (Debian: tesseract-ocr-<pack>).
TESSERACT = {"en": "eng", "de": "deu", "fr": "fra", "es": "spa", "it": "ita", "pt": "por", "nl": "nld", "da": "dan",
             "sv": "swe", "no": "nor", "nb": "nor", "fi": "fin", "pl": "pol", "cs": "ces", "sk": "slk", "hu": "hun",
             "ro": "ron", "tr": "tur", "el": "ell", "ru": "rus", "uk": "ukr", "bg": "bul", "ar": "ara", "he": "heb",
             "fa": "fas", "hi": "hin", "th": "tha", "vi": "vie", "id": "ind", "zh": "chi_sim", "ja": "jpn", "ko": "kor"}


def packs(config: RagConfiguration) -> tuple[list[str], list[str]]:
    """(the packs ``config``'s scans are read with, the packs its ``language`` asks for that are not installed):
    ``ocrLanguages`` when the knowledge base names it, else the packs of its ``language`` codes that are installed
    (English's when it is ``auto`` or none is)."""
    language = config.language
    if "ocrLanguages" in config.model_fields_set or language == "auto":
        return list(config.ocrLanguages), []
    wanted = list(dict.fromkeys(TESSERACT[c] for c in ([language] if isinstance(language, str) else language) if c in TESSERACT))
    installed = installed_languages()
    kept = [p for p in wanted if installed is None or p in installed]
    return kept or list(DEFAULT_LANGUAGES), [p for p in wanted if p not in kept]


def language_errors(languages: list[str], installed: set[str] | None = None) -> list[str]:
    """Why ``languages`` cannot be read here, one line each (none when Tesseract is not installed at all: a
    configuration may be saved on a server that reads no scans; a scan then fails naming the package).
    ``installed``: ``installed_languages()``, when the caller has it."""
    installed = installed if installed is not None else installed_languages()
    if installed is None:
        return []
    return [f"Tesseract's language pack {lang!r} is not installed on the server (installed: "
            f"{', '.join(sorted(installed)) or 'none'}; Debian: apt-get install tesseract-ocr-{lang.replace('_', '-').lower()})"
            for lang in languages if lang not in installed]


def check(languages: list[str]) -> None:
    """Raise OcrUnavailableError unless Tesseract and every language pack in ``languages`` are installed."""
    installed = installed_languages()
    if installed is None:
        raise OcrUnavailableError("this document needs OCR, and Tesseract is not installed on the server "
                                  "(Debian: apt-get install tesseract-ocr tesseract-ocr-eng)")
    if errors := language_errors(languages, installed):
        raise OcrUnavailableError("; ".join(errors))


def read(image: Any, languages: list[str]) -> OcrPage:
    """The lines Tesseract reads on a PIL image, in reading order (block, paragraph, line), each with its box (in
    ``image``'s pixels) and confidence; a blank line between paragraphs. A page read with low confidence is checked
    for being sideways or upside down (Tesseract's orientation detection, about a second, only then) and read again
    upright when it is; ``rotated`` says by how many degrees clockwise."""
    os.environ["OMP_THREAD_LIMIT"] = "1"  # its OpenMP threads spin against each other on few cores (9x slower here)
    page = _read(image, languages)
    if page.confidence >= LOW_CONFIDENCE:
        return page
    turn = upright_turn(image)
    if not turn:
        return page
    upright = _read(image.rotate(-turn, expand=True), languages)
    if upright.confidence <= page.confidence:
        return page
    upright.lines = [replace(line, box=_turned_back(line.box, turn, image.width, image.height)) for line in upright.lines]
    upright.width, upright.height, upright.rotated = image.width, image.height, turn
    return upright


def upright_turn(image: Any) -> int:
    """How many degrees clockwise (90, 180, 270) ``image`` must turn to stand upright, by Tesseract's orientation and
    script detection (Debian's ``osd`` pack, installed with ``tesseract-ocr``); 0 when it stands, or when the detection
    is unsure or cannot run (too little text)."""
    import pytesseract

    try:
        osd = pytesseract.image_to_osd(image, output_type=pytesseract.Output.DICT)
    except pytesseract.TesseractError:  # too few characters to tell, or no osd pack
        return 0
    turn = int(osd.get("rotate", 0)) % 360
    return turn if turn in (90, 180, 270) and float(osd.get("orientation_conf", 0.0)) >= MIN_ORIENTATION_CONFIDENCE else 0


def _turned_back(box: tuple[int, int, int, int], turn: int, width: int, height: int) -> tuple[int, int, int, int]:
    """A box read on the image turned ``turn`` degrees clockwise, in the original image's pixels (``width`` ×
    ``height``)."""
    left, top, right, bottom = box
    if turn == 90:  # (x, y) upright came from (y, height - x)
        return top, height - right, bottom, height - left
    if turn == 270:  # from (width - y, x)
        return width - bottom, left, width - top, right
    return width - right, height - bottom, width - left, height - top  # 180


def _read(image: Any, languages: list[str]) -> OcrPage:
    import pytesseract

    data = pytesseract.image_to_data(image, lang="+".join(languages), output_type=pytesseract.Output.DICT)
    page = OcrPage(width=image.width, height=image.height)
    current: tuple[int, int, int] | None = None
    words: list[tuple[str, int, int, int, int, float]] = []

    def flush(paragraph_break: bool) -> None:
        if not words:
            return
        if paragraph_break and page.lines:
            page.lines.append(OcrLine("", page.lines[-1].box, 1.0))
        text = " ".join(w[0] for w in words)
        box = (min(w[1] for w in words), min(w[2] for w in words), max(w[3] for w in words), max(w[4] for w in words))
        page.lines.append(OcrLine(text, box, sum(w[5] for w in words) / len(words), tuple(w[4] - w[2] for w in words)))
        words.clear()

    for i, word in enumerate(data["text"]):
        if not word.strip():
            continue
        key = (data["block_num"][i], data["par_num"][i], data["line_num"][i])
        if key != current:
            flush(current is not None and key[:2] != current[:2])
            current = key
        left, top = data["left"][i], data["top"][i]
        words.append((word, left, top, left + data["width"][i], top + data["height"][i],
                      max(0.0, float(data["conf"][i])) / 100))
    flush(False)
    page.lines = _without_trailing_blank(page.lines)
    return page


def _without_trailing_blank(lines: list[OcrLine]) -> list[OcrLine]:
    while lines and not lines[-1].text:
        lines.pop()
    return lines
