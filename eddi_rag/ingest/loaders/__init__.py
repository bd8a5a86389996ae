"""Files in: decide what a body is, then extract its text as parts that carry citation metadata.

The type is decided from the content (magic bytes), the declared Content-Type and the file name's
extension together (``detect``): a body whose bytes are a PDF is a PDF whatever it is called; a body
declared or named as a binary format whose bytes are not that format, a binary body of any other
type, or bytes that are not text (UTF-8; UTF-16 or UTF-32 with a byte-order mark; Windows-1252 without control
characters), is refused with ``UnsupportedFileTypeError`` naming what was detected and what is supported. Among text
formats the Content-Type wins when it is specific, then the extension, then a look at the content (``<html``), else plain text.

``load`` returns ``Part``s: the text of a page, a slide, a group of spreadsheet rows, or a whole
Markdown text (``markdown=True``: its headings give each chunk its ``section``), each with the
citation metadata that names where it came from (``page``, ``slide``, ``sheet``/``row``/``cell``
or ``cells``, ``row``/``rows``); a page of a PDF or an image also keeps its lines' boxes, so each chunk
knows where on the page it is (``ingest.boxes``). A file that is encrypted, corrupt or holds no extractable text
raises ``UnreadableDocumentError`` with the reason.
"""

from __future__ import annotations

import codecs
import importlib
import io
import re
import unicodedata
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any, Protocol

import filetype

from eddi_rag.errors import FILE, EddiRagError


@dataclass(frozen=True)
class Part:
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)  # citation: page, slide, sheet, row(s), cell(s)
    markdown: bool = False  # Markdown text: headings give sections
    headings: tuple[str, ...] = ()  # the heading path in force where the part begins (a PDF page's: "# A", "## B")
    lines: tuple[tuple[str, tuple[float, float, float, float]], ...] = ()  # a page's lines and their boxes (ingest.boxes)


class UnsupportedFileTypeError(EddiRagError, ValueError):
    """The body is of no supported type (HTTP 415)."""
    status = 415
    failure = FILE


class UnreadableDocumentError(EddiRagError, ValueError):
    """A file of a supported type that cannot be read: encrypted, corrupt, or without text."""
    status = 422
    failure = FILE


class PasswordProtectedError(UnreadableDocumentError):
    """A file that opens only with a password (an Office file encrypted to open): the file is fine, the fix is its
    owner's (remove the password), so it is named apart from a corrupt one."""


@dataclass(frozen=True)
class Format:
    name: str
    media_type: str
    extensions: tuple[str, ...]
    binary: bool  # recognised by its magic bytes (else: UTF-8 text)


FORMATS = {f.name: f for f in (
    Format("pdf", "application/pdf", (".pdf",), True),
    Format("docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", (".docx",), True),
    Format("pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation", (".pptx",), True),
    Format("xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", (".xlsx", ".xlsm"), True),
    Format("csv", "text/csv", (".csv",), False),
    Format("html", "text/html", (".html", ".htm", ".xhtml"), False),
    Format("markdown", "text/markdown", (".md", ".markdown"), False),
    Format("text", "text/plain", (".txt", ".text"), False),
    Format("image", "image/png", (".png", ".jpg", ".jpeg", ".tif", ".tiff", ".webp", ".bmp"), True),
    Format("mail", "message/rfc822", (".eml",), False),
    Format("msg", "application/vnd.ms-outlook", (".msg",), True),
    Format("epub", "application/epub+zip", (".epub",), True),
    Format("odt", "application/vnd.oasis.opendocument.text", (".odt",), True),
    Format("ods", "application/vnd.oasis.opendocument.spreadsheet", (".ods",), True),
    Format("odp", "application/vnd.oasis.opendocument.presentation", (".odp",), True),
    Format("rtf", "application/rtf", (".rtf",), True),
)}
ZIPPED = frozenset({"docx", "pptx", "xlsx", "epub", "odt", "ods", "odp"})  # zip archives, checked before they are inflated
READ_BY_OCR = frozenset({"pdf", "image", "mail", "msg"})  # formats with pages that may be scans (a mail's attachments): their loaders take ``ocr``
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_OOXML = "EncryptedPackage".encode("utf-16-le")  # the stream an encrypted Office Open XML file's container holds
_MAIL_HEADERS = re.compile(r"^(received|from|to|cc|subject|date|message-id|mime-version|return-path|delivered-to|"
                           r"content-type|reply-to|x-[a-z-]+):", re.I | re.M)
_BY_MEDIA_TYPE = {f.media_type: f for f in FORMATS.values()} | {
    "application/xhtml+xml": FORMATS["html"], "text/x-markdown": FORMATS["markdown"],
    "application/csv": FORMATS["csv"], "application/vnd.ms-excel.sheet.macroenabled.12": FORMATS["xlsx"],
    **{f"image/{kind}": FORMATS["image"] for kind in ("jpeg", "tiff", "webp", "bmp", "x-ms-bmp")},
    "text/rtf": FORMATS["rtf"], "application/x-msg": FORMATS["msg"],
}
_BY_EXTENSION = {ext: f for f in FORMATS.values() for ext in f.extensions}
EXTENSIONS = frozenset(_BY_EXTENSION)  # every file name ending a loader reads (".md", ".pdf" ...)
_UNSPECIFIC = {"", "text/plain", "application/octet-stream", "binary/octet-stream"}


def supported() -> str:
    return ", ".join(f"{f.name} ({' '.join(f.extensions)})" for f in FORMATS.values())


def readable() -> str:
    """The formats read, as a person names them ("PDF, DOCX, …, images (PNG, JPEG, TIFF …: read by OCR), EML, …"): the
    upload hint, made from FORMATS so a new loader is named there too."""
    return ", ".join("images (PNG, JPEG, TIFF, WebP, BMP: read by OCR)" if f.name == "image" else f.extensions[0][1:].upper()
                     for f in FORMATS.values())


def _refuse(detected: str) -> UnsupportedFileTypeError:
    return UnsupportedFileTypeError(f"unsupported file type: detected {detected}; supported: {supported()}")


def detect(data: bytes, content_type: str | None = None, filename: str | None = None) -> str:
    """The format name of ``data``; raises UnsupportedFileTypeError."""
    declared_type = (content_type or "").split(";")[0].strip().lower()
    declared = _BY_MEDIA_TYPE.get(declared_type)
    named = _BY_EXTENSION.get(PurePath(filename or "").suffix.lower())
    if data.startswith(_OLE_MAGIC):  # an OLE compound file: an Outlook message, or a .doc, .xls...
        if FORMATS["msg"] in (named, declared):
            return "msg"
        if _ENCRYPTED_OOXML in data:  # ECMA-376's encrypted package: a .docx, .xlsx or .pptx with a password to open it
            raise PasswordProtectedError(
                f"{filename or 'the file'}: a password-protected Office file (a .docx, .xlsx or .pptx encrypted with a "
                "password to open it): nothing in it can be read without the password. Remove the password (in Office: "
                "File > Info > Protect > Encrypt with Password, cleared) and upload it again")
        raise _refuse("an OLE compound file (a legacy .doc, .xls or .ppt: save it as .docx, .xlsx or .pptx; or an Outlook "
                      "message not named .msg)")
    magic = filetype.guess(data[:8192]) if data else None
    if magic is not None:
        found = _BY_MEDIA_TYPE.get(magic.mime.lower())
        if found is not None and found.binary:
            return found.name
        if magic.mime == "application/zip" and named and named.name in ZIPPED:
            return named.name  # a zip-based file whose parts filetype did not recognise: its parser decides
        raise _refuse(f"{magic.mime} (.{magic.extension})")
    if FORMATS["mail"] in (named, declared):
        return "mail"  # a mail's body may be 8-bit in any charset: its parser decodes it
    claimed = next((f for f in (declared, named) if f is not None and f.binary), None)
    if claimed is not None:
        raise _refuse(f"content that is not {claimed.name} (declared {declared_type or 'no Content-Type'}, "
                      f"name {filename or 'none'})")
    encoding = next((e for bom, e in _BOMS if data.startswith(bom)), None)
    if encoding is None and b"\x00" in data[:8192]:
        raise _refuse("binary data of unknown type")
    text = _text_head(data, encoding)
    if declared is not None and declared_type not in _UNSPECIFIC:
        return declared.name
    if named is not None:
        return named.name
    if text.lstrip()[:200].lower().startswith(("<!doctype html", "<html")):
        return "html"
    if _looks_like_mail(text):
        return "mail"
    return "text"


def _text_head(data: bytes, encoding: str | None, head: int = 65536) -> str:
    """The first ``head`` characters of ``data`` as text: in the encoding its byte-order mark names, else UTF-8 (all of
    it checked), else Windows-1252 when it holds no control character (``text_encoding``); UnsupportedFileTypeError
    when it is none of them."""
    if encoding is not None and encoding != "utf-8-sig":
        return _readable(data[:head * 4].decode(encoding, "replace")[:head], encoding)
    try:
        return _utf8_head(data, head)
    except UnsupportedFileTypeError:
        if text_encoding(data) == "cp1252":
            return _readable(data[:head].decode("cp1252"), "cp1252")
        raise


NOT_TEXT = frozenset({"Cs", "Co", "Cn", "Cc"})  # surrogates, private use, unassigned, control: what random bytes decode to


def _readable(text: str, encoding: str) -> str:
    """``text`` decoded by a guess (a byte-order mark, or Windows-1252 because it was not UTF-8), when it reads as text;
    else UnsupportedFileTypeError: random bytes behind a UTF-16 mark decode to surrogates, private-use and unassigned
    characters (about a fifth of them), and bytes that happen to hold no control character decode to Windows-1252's
    upper half, where a Western text written in it is mostly ASCII (a text in another code page, Cyrillic's say, is
    refused too: saved as UTF-8 it is read)."""
    sample = text[:65536]
    if encoding == "cp1252":
        letters = [c for c in sample if not c.isspace()]
        if letters and sum(c < "\x80" for c in letters) < 0.6 * len(letters):
            raise _refuse("binary data, or text in a code page other than UTF-8 and Windows-1252 (of its first "
                          f"{len(letters):,} characters read as Windows-1252, {sum(c >= chr(128) for c in letters):,} are "
                          "outside ASCII): save a text as UTF-8")
        return text
    odd = sum(1 for c in sample if c == "\ufffd" or (unicodedata.category(c) in NOT_TEXT and not c.isspace()))
    if sample and odd > max(2, 0.01 * len(sample)):
        raise _refuse(f"binary data behind a {encoding.upper()} byte-order mark ({odd:,} of its first {len(sample):,} "
                      "characters are no text: unassigned, private-use, surrogate or control characters)")
    return text


def _utf8_head(data: bytes, head: int = 65536, step: int = 1 << 20) -> str:
    """The first ``head`` characters of ``data`` read as UTF-8 text (a BOM skipped), all of it checked a step at a
    time (a large upload is never held twice, as bytes and as text); UnsupportedFileTypeError at the first invalid
    byte, counted in the file."""
    at = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    text = ""
    while at < len(data):
        final = at + step >= len(data)
        try:
            piece, used = codecs.utf_8_decode(data[at:at + step], "strict", final)
        except UnicodeDecodeError as e:
            raise _refuse(f"bytes that are neither a known binary format nor text (invalid UTF-8 at byte "
                          f"{at + e.start}; not Windows-1252 text either: it holds control characters)") from e
        if len(text) < head:
            text += piece[:head - len(text)]
        at += used
    return text


def _looks_like_mail(text: str) -> bool:
    """A text that begins with a header block (every line ``Name: value`` or its continuation) naming at least
    three mail headers (From, To, Subject, Received...), then a blank line."""
    start = text.replace("\r\n", "\n").lstrip("\n")[:16384]
    if "\n\n" not in start:
        return False
    head = start.split("\n\n", 1)[0]
    if not all(re.match(r"^([!-9;-~]+:|[ \t])", line) for line in head.split("\n")):
        return False
    return len({m.lower() for m in _MAIL_HEADERS.findall(head)}) >= 3


class Counter(Protocol):
    """What a loader reports as it reads (``ingest.limits.Meter``: counted against the document limits)."""

    def count(self, unit: str, n: int = 1) -> None: ...  # unit: "pages", "rows" or "attachments"
    def whole(self, unit: str, n: int) -> None: ...  # a count known before reading
    def ocr_pages(self, n: int) -> None: ...  # pages OCR will read, before it reads any
    def pixels(self, width: int, height: int, what: str = "an image") -> None: ...  # an image's declared size
    def zip(self, data: bytes, name: str, kind: str) -> None: ...  # a zip inside the file, before it is inflated
    def characters(self, n: int) -> None: ...  # text of this many characters, before it is read


class _Uncounted:
    def count(self, unit: str, n: int = 1) -> None:
        pass

    def whole(self, unit: str, n: int) -> None:
        pass

    def ocr_pages(self, n: int) -> None:
        pass

    def pixels(self, width: int, height: int, what: str = "an image") -> None:
        pass

    def zip(self, data: bytes, name: str, kind: str) -> None:
        pass

    def characters(self, n: int) -> None:
        pass


def load(fmt: str, data: bytes, name: str, fits: Callable[[str], bool], counter: Counter | None = None,
         ocr: dict[str, Any] | None = None) -> list[Part]:
    """Extract ``data`` (already detected as ``fmt``) into parts. ``fits`` tells table loaders how
    many rows one chunk may hold; ``counter`` hears the pages and rows read (and may stop the read by
    raising); ``ocr``: how scans and images are read (``ingest.ocr.spec``; default: ``auto`` in English).
    Raises UnreadableDocumentError; no parts means no text. Untrusted files go through
    ``ingest.parsing.parse``: a limited process, the zip and document limits."""
    if fmt not in FORMATS:
        raise _refuse(repr(fmt))
    module = importlib.import_module(f"{__name__}.{fmt}")
    options = {"ocr": ocr or {"mode": "auto", "languages": ["eng"]}} if fmt in READ_BY_OCR else {}
    parts = module.load(data, name, fits, counter or _Uncounted(), **options)
    return [replace(p, text=clean_text(p.text)) if _SURROGATE.search(p.text) else p for p in parts if p.text.strip()]


_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF8, "utf-8-sig"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]")  # bytes no text file holds (not \t \n \f \r, ESC)


def text_encoding(data: bytes) -> str | None:
    """How ``data`` is text: the encoding its byte-order mark names (UTF-8, UTF-16, UTF-32), else UTF-8 when it is valid,
    else Windows-1252 (Latin-1's superset, what Western editors save) when no byte is a control character no text
    holds; None: not text."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    try:
        codecs.utf_8_decode(data, "strict", True)
        return "utf-8"
    except UnicodeDecodeError:
        pass
    if _CONTROL.search(data) is None:
        try:
            data.decode("cp1252")
            return "cp1252"
        except UnicodeDecodeError:  # (five bytes Windows-1252 leaves undefined)
            return None
    return None


def decode_text(data: bytes) -> str:
    """``data`` as text (``text_encoding``), lone surrogates (a UTF-16 half no text can hold) as U+FFFD."""
    encoding = text_encoding(data)
    if encoding is None:
        raise _refuse("bytes that are neither a known binary format nor text (UTF-8, UTF-16 or UTF-32 with its "
                      "byte-order mark, or Windows-1252)")
    text = data.decode(encoding, "replace")
    if encoding not in ("utf-8", "utf-8-sig"):
        _readable(text, encoding)
    return clean_text(text)


def rewritten(data: bytes, change: Callable[[str, bytes], bytes]) -> bytes:
    """A zip package (an Office or OpenDocument file) with each part as ``change(its name, its bytes)`` makes it (the
    package's size was checked before it was inflated: limits.check_zip)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy:
        for item in source.infolist():
            copy.writestr(item, change(item.filename, source.read(item)))
    return out.getvalue()


_SURROGATE = re.compile("[\ud800-\udfff]")


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate (which no UTF-8 can hold: storing it fails) as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)
