"""Small files that become huge jobs (issue 42, point 4): a 1.85 MB mail of 10,000 tiny attachments queued 10,464
chunks (about 35 minutes of embedding here), a 761-byte spreadsheet of repeated rows 12,987 (415 s). A file's chunks
are bounded by its own size, a mail's attachments by a count: both checked before anything is embedded, and the
failure names the limit and its setting. The documents are made at run time with odfpy and Python's email package."""

from __future__ import annotations

from email.message import EmailMessage

import pytest

from eddi_rag.ingest.limits import MB, SMALL_FILE_CHUNKS, DocumentLimitError, DocumentLimits, chunk_bound
from tests.support.documents import ods_repeated_rows
from tests.support.kbs import make_kb


def mail_with_attachments(n: int) -> bytes:
    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "Many files"
    message.set_content("See the attached notes.")
    for i in range(n):
        message.add_attachment(f"Note {i}.".encode(), maintype="text", subtype="plain", filename=f"note-{i}.txt")
    return message.as_bytes()


def test_the_bound_grows_with_the_file():
    limits = DocumentLimits()
    assert chunk_bound(limits, None) == (20_000, "max_chunks")
    assert chunk_bound(limits, 761) == (SMALL_FILE_CHUNKS, "max_chunks_per_mb")
    assert chunk_bound(limits, 2 * MB) == (4_000, "max_chunks_per_mb")
    assert chunk_bound(limits, 50 * MB) == (20_000, "max_chunks")  # never above the document bound


@pytest.mark.integration  # (files are parsed in a child process)
def test_a_tiny_spreadsheet_of_repeated_rows_is_refused_before_embedding(runtime):
    kb = make_kb(runtime, chunkStrategy="recursive", chunkSize=100, chunkOverlap=0)
    data = ods_repeated_rows(20_000)
    assert len(data) < 10_000
    with pytest.raises(DocumentLimitError) as refused:
        runtime.ingesting.file(kb, "rows.ods", data)
    assert "EDDI_RAG_MAX_CHUNKS_PER_MB=2000" in str(refused.value) and f"{len(data):,} bytes" in str(refused.value)
    assert runtime.documents.list(kb)["documents"] == []  # nothing stored, nothing embedded
    assert runtime.ingesting.file(kb, "few.ods", ods_repeated_rows(20)) > 0  # a small one is read


@pytest.mark.integration  # (files are parsed in a child process)
def test_a_mail_of_too_many_attachments_is_refused_naming_the_limit(runtime):
    kb = make_kb(runtime)
    with pytest.raises(DocumentLimitError, match="more than 500 attachments.*EDDI_RAG_MAX_ATTACHMENTS=500"):
        runtime.ingesting.file(kb, "many.eml", mail_with_attachments(600))
    assert runtime.ingesting.file(kb, "some.eml", mail_with_attachments(20)) > 0


@pytest.mark.integration  # (files are parsed in a child process)
def test_an_attachment_over_a_limit_is_skipped_and_named_not_the_whole_mail(runtime):
    """Finding 10: a mail with one bomb attachment failed whole; its other parts are worth reading."""
    from tests.support import bombs

    message = EmailMessage()
    message["From"], message["To"], message["Subject"] = "a@example.com", "b@example.com", "Quarterly report"
    message.set_content("The quarterly numbers are in the attached files.")
    message.add_attachment(bombs.docx_inflating_to(300), maintype="application",
                           subtype="vnd.openxmlformats-officedocument.wordprocessingml.document", filename="bomb.docx")
    message.add_attachment(b"Revenue grew by 12 percent.", maintype="text", subtype="plain", filename="numbers.txt")
    kb = make_kb(runtime, minScore=0)
    assert runtime.ingesting.file(kb, "report.eml", message.as_bytes()) >= 2
    texts = " ".join(c.text for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None))
    assert "Revenue grew by 12 percent." in texts and "bomb.docx" in texts and "EDDI_RAG_MAX" in texts


def big_chapter_epub(words: int) -> bytes:
    """An EPUB (its zip written by hand, as a packager writes one) whose one chapter holds ``words`` words."""
    import io
    import zipfile

    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        z.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
                   'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type='
                   '"application/oebps-package+xml"/></rootfiles></container>')
        z.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" '
                   'unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">x'
                   '</dc:identifier><dc:title>Big</dc:title><dc:language>en</dc:language></metadata><manifest><item id="c1" '
                   'href="c1.xhtml" media-type="application/xhtml+xml"/></manifest><spine><itemref idref="c1"/></spine></package>')
        z.writestr("OEBPS/c1.xhtml", '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>c</title></head><body>'
                   '<h1>Big</h1><p>' + "word " * words + "</p></body></html>")
    return out.getvalue()


@pytest.mark.integration  # (files are parsed in a child process)
def test_a_huge_epub_chapter_is_refused_naming_the_limit_not_read_as_empty(runtime, monkeypatch):
    """Finding 10: a 200 MB chapter failed as "text is empty" (ebooklib's rewrite through lxml drops a text node over
    10 MB); here one of 15 MB against a 10-million-character limit, and one under it is read whole."""
    monkeypatch.setenv("EDDI_RAG_MAX_CHARS", "10000000")
    from eddi_rag.ingest.limits import DocumentLimits

    runtime.ingestor.limits = DocumentLimits.from_env()
    kb = make_kb(runtime)
    with pytest.raises(DocumentLimitError, match="EDDI_RAG_MAX_CHARS=10000000"):
        runtime.ingesting.file(kb, "big.epub", big_chapter_epub(3_000_000))



def test_an_epub_chapter_over_ten_megabytes_is_read_whole():
    from eddi_rag.ingest.loaders import epub
    from eddi_rag.ingest.loaders import load as _load  # noqa: F401 - (the loaders' registry: epub is one of them)

    class Counted:
        def count(self, unit: str, n: int = 1) -> None: ...
        def characters(self, n: int) -> None:
            self.chars = n

    meter = Counted()
    (part,) = epub.load(big_chapter_epub(2_400_000), "long.epub", lambda text: True, meter)  # type: ignore[arg-type]
    assert meter.chars > 12_000_000 and len(part.text) > 11_000_000 and part.text.startswith("# Big")
