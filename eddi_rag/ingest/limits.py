"""How much one document may cost: the operator's hard limits on parsing an untrusted file (memory,
CPU time, wall time of the parse process), on what a zip-based file may unpack to (DOCX, PPTX, XLSX,
EDDI exports: checked from the zip's directory before anything is inflated), and on what one document
may become (pages, rows, characters, chunks). Each comes from an environment variable; a document over
one fails with a reason that names the limit and the variable (``DocumentLimitError``)."""

from __future__ import annotations

import io
import os
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, fields

from eddi_rag.ingest.loaders import UnreadableDocumentError

MB = 1024 * 1024
DEFAULT_MAX_UPLOAD_MB = 50


def max_upload_bytes() -> int:
    """The largest file accepted, uploaded or read by a folder or Git source on the server (env
    EDDI_RAG_MAX_UPLOAD_MB, default 50)."""
    raw = os.environ.get("EDDI_RAG_MAX_UPLOAD_MB", str(DEFAULT_MAX_UPLOAD_MB))
    try:
        mb = float(raw)
    except ValueError:
        raise ValueError(f"EDDI_RAG_MAX_UPLOAD_MB must be a number of megabytes, got {raw!r}") from None
    return int(mb * 1024 * 1024)


class DocumentLimitError(UnreadableDocumentError):
    """A document over one of the operator's limits; the message names the limit and its setting."""


@dataclass(frozen=True)
class DocumentLimits:
    parse_memory_mb: int = 1024  # address space of the parse process
    parse_cpu_seconds: int = 120
    parse_seconds: int = 300  # wall time of one parse, cancel aside
    max_unzipped_mb: int = 512  # what a zip-based file may unpack to, all entries
    max_zip_entry_mb: int = 256  # ... one entry
    max_zip_entries: int = 10_000
    max_pages: int = 5_000  # PDF pages, PPTX slides, images of a TIFF
    max_ocr_pages: int = 200  # pages of one document read by OCR (about a second each here: within parse_seconds)
    max_image_pixels: int = 40_000_000  # one image or rendered page (an A4 page at 600 dpi is 35 million)
    max_rows: int = 200_000  # CSV and spreadsheet rows, table rows
    max_chars: int = 20_000_000  # text extracted from one document
    max_chunks: int = 20_000  # chunks one document becomes
    max_chunks_per_mb: int = 2_000  # ... and one file, per MB of its own bytes beyond SMALL_FILE_CHUNKS (a few bytes
    # that unfold into thousands of chunks, a spreadsheet of repeated cells, a mail of tiny attachments: hours of embedding)
    max_attachments: int = 500  # attachments of one mail, the mails inside it included
    isolate: bool = True  # parse binary and markup formats in a separate, limited process

    @staticmethod
    def setting(name: str) -> str:
        return "EDDI_RAG_" + name.upper()

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> DocumentLimits:
        """The defaults above, each overridden by ``EDDI_RAG_<NAME>`` (e.g. EDDI_RAG_MAX_ROWS=50000;
        EDDI_RAG_ISOLATE=0 parses in the server's own process, for debugging only)."""
        env = os.environ if environ is None else environ
        values: dict[str, object] = {}
        for f in fields(cls):
            raw = env.get(cls.setting(f.name))
            if raw is None or not raw.strip():
                continue
            if f.name == "isolate":
                values[f.name] = raw.strip().lower() not in ("0", "false", "no", "off")
                continue
            if not raw.strip().isdigit() or int(raw) < 1:
                raise ValueError(f"{cls.setting(f.name)} must be a positive whole number, got {raw!r}")
            values[f.name] = int(raw)
        limits = cls(**values)  # type: ignore[arg-type]
        if limits.parse_memory_mb < 256:
            raise ValueError(f"{cls.setting('parse_memory_mb')} must be at least 256 (the parser itself needs about 220 MB)")
        return limits

    def over(self, name: str, text: str) -> DocumentLimitError:
        """The error for a document over limit ``name``: ``text`` says what it has; the limit and its setting follow."""
        return DocumentLimitError(f"{text} (limit: {self.setting(name)}={getattr(self, name)})")


SMALL_FILE_CHUNKS = 1_000  # chunks any file may make, however small (about half a minute of embedding here)


def chunk_bound(limits: DocumentLimits, file_bytes: int | None) -> tuple[int, str]:
    """The most chunks a document may make, and the limit that sets it: ``max_chunks``, or for a file of
    ``file_bytes`` bytes ``max_chunks_per_mb`` of them (at least SMALL_FILE_CHUNKS), whichever is lower."""
    if file_bytes is None:
        return limits.max_chunks, "max_chunks"
    by_size = max(SMALL_FILE_CHUNKS, -(-file_bytes * limits.max_chunks_per_mb // MB))
    return (by_size, "max_chunks_per_mb") if by_size < limits.max_chunks else (limits.max_chunks, "max_chunks")


class Meter:
    """Counts what a loader reads (``pages``, ``rows``) against the limits, failing at the first one
    over, and reports the count as parse progress (at most every half second)."""

    LIMITS = {"pages": "max_pages", "rows": "max_rows", "attachments": "max_attachments"}

    def __init__(self, limits: DocumentLimits, report: Callable[[str, int], None] | None = None):
        self.limits, self.report = limits, report
        self.counts: dict[str, int] = {}
        self._last = 0.0

    def count(self, unit: str, n: int = 1) -> None:
        done = self.counts[unit] = self.counts.get(unit, 0) + n
        name = self.LIMITS[unit]
        if done > getattr(self.limits, name):
            raise self.limits.over(name, f"the document has more than {getattr(self.limits, name):,} {unit}")
        if self.report is not None and time.monotonic() - self._last >= 0.5:
            self._last = time.monotonic()
            self.report(unit, done)

    def whole(self, unit: str, n: int) -> None:
        """A count known before reading (a PDF's pages): refused at once when over."""
        name = self.LIMITS[unit]
        if n > getattr(self.limits, name):
            raise self.limits.over(name, f"the document has {n:,} {unit}")

    def ocr_pages(self, n: int) -> None:
        """The pages of the document OCR would read, known before it reads any: refused at once when over."""
        if n > self.limits.max_ocr_pages:
            raise self.limits.over("max_ocr_pages", f"the document has {n:,} pages to read by OCR")

    def pixels(self, width: int, height: int, what: str = "an image") -> None:
        """An image's size as declared (before it is decoded): refused when over."""
        if width * height > self.limits.max_image_pixels:
            raise self.limits.over("max_image_pixels", f"{what} is {width:,} × {height:,} pixels")

    def zip(self, data: bytes, name: str, kind: str) -> None:
        """A zip inside the document (a mail's DOCX attachment): its directory checked against the unzip limits."""
        check_zip(data, self.limits, name, kind)

    def characters(self, n: int) -> None:
        if n > self.limits.max_chars:
            raise self.limits.over("max_chars", f"the document's text is {n:,} characters")


def check_zip(data: bytes, limits: DocumentLimits, what: str = "the file", kind: str = "zip file") -> None:
    """Refuse a zip whose directory declares more than the limits allow, before anything is inflated
    (Python's zipfile never inflates an entry past its declared size: a lie fails its CRC)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, ValueError) as e:
        raise UnreadableDocumentError(f"{what}: corrupt or unreadable {kind} (not a readable zip: {e})") from None
    entries = archive.infolist()
    if len(entries) > limits.max_zip_entries:
        raise limits.over("max_zip_entries", f"{what}: the zip has {len(entries):,} entries")
    biggest = max(entries, key=lambda e: e.file_size, default=None)
    if biggest is not None and biggest.file_size > limits.max_zip_entry_mb * MB:
        raise limits.over("max_zip_entry_mb", f"{what}: the zip's entry {biggest.filename[:100]!r} unpacks to "
                                              f"{biggest.file_size / MB:,.1f} MB")
    total = sum(e.file_size for e in entries)
    if total > limits.max_unzipped_mb * MB:
        raise limits.over("max_unzipped_mb", f"{what}: the zip unpacks to {total / MB:,.1f} MB")
