"""Scans and images read by OCR (issue 32): pages printed by headless Chromium and scanned the way an office
scanner does (``tests/support/scans.py``: 150 dpi, greyscale, turned 0.7°), uploaded as image-only PDFs, mixed
PDFs and images of every kind, read by Tesseract in the limited parse process; and the files that would take a
server down (a declared 100,000 × 100,000 image, a 2,000-page scan) refused naming their setting."""

from __future__ import annotations

import io
import struct
import zlib

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime
from tests.support import scans
from tests.support.kbs import make_kb
from tests.support.waiting import ingestion_ended

pytestmark = pytest.mark.integration  # Chromium prints; Tesseract reads in the parse process

BASE = "/ragstore/rags"
MANUAL = """# Coffee machine manual

## Descaling

Descale the machine every 200 cups. Fill the tank with one litre of water and 50 millilitres of descaler,
then hold the steam button for five seconds until the orange light blinks.

## Warranty

The warranty lasts 36 months from the date of purchase and covers the pump and the heating element.
"""
GERMAN = """# Reisebedingungen

Größere Gepäckstücke müssen vorab angemeldet werden. Kleine Hunde reisen kostenlos in einer Transportbox.
"""


@pytest.fixture(scope="module")
def scanned():
    """(the manual's scanned pages as images, its digital PDF)."""
    digital = scans.printed(MANUAL)
    return scans.scanned_pages(digital), digital


@pytest.fixture
def client(tmp_path):
    with Runtime(tmp_path / "data") as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        client.runtime = runtime
        yield client


def upload(client, kb: str, name: str, data: bytes, content_type: str = "application/octet-stream") -> dict:
    r = client.post(f"{BASE}/{kb}/ingest?documentName={name}", content=data, headers={"Content-Type": content_type})
    assert r.status_code == 202, r.text
    return ingestion_ended(client, f"{BASE}/{kb}/ingestion/{r.json()['ingestionId']}/status")


def chunks(client, kb: str, name: str) -> list[dict]:
    """The stored chunks of document ``name``: {text, metadata}."""
    runtime = client.runtime
    stored = runtime.stores.get(kb, runtime.rag_config(kb)).get({"source": name})
    assert stored, f"no chunks of {name}"
    return [{"text": c.text, "metadata": c.metadata} for c in stored]


def test_a_scanned_pdf_is_read_and_its_answer_found(client, scanned):
    pages, _ = scanned
    kb = make_kb(client, "Manuals", minScore=0, chunkStrategy="recursive", chunkSize=300)
    assert upload(client, kb, "manual-scan.pdf", scans.image_pdf(pages))["status"] == "completed"
    found = client.post(f"{BASE}/{kb}/query", json={"query": "How often should I descale the machine?", "maxResults": 1}).json()
    hit = found["results"][0]
    assert "200 cups" in hit["text"] and hit["metadata"]["page"] == 1 and hit["metadata"]["ocr"] is True
    assert 0.8 < hit["metadata"]["ocrConfidence"] <= 1


def test_only_the_pages_without_text_are_read_by_ocr(client, scanned):
    """A mixed PDF: its digital page keeps its text layer; its scanned page is read by OCR."""
    from pypdf import PdfReader, PdfWriter

    pages, digital = scanned
    writer = PdfWriter()
    writer.add_page(PdfReader(io.BytesIO(scans.printed("# Cover\n\nThe espresso model EX-9 manual, edition 2026."))).pages[0])
    writer.add_page(PdfReader(io.BytesIO(scans.image_pdf(pages))).pages[0])
    mixed = io.BytesIO()
    writer.write(mixed)
    kb = make_kb(client, "Mixed", minScore=0, chunkStrategy="recursive", chunkSize=2000)
    assert upload(client, kb, "mixed.pdf", mixed.getvalue())["status"] == "completed"
    by_page = {c["metadata"]["page"]: c["metadata"] for c in chunks(client, kb, "mixed.pdf")}
    assert set(by_page) == {1, 2} and "ocr" not in by_page[1] and by_page[2]["ocr"] is True


def test_images_of_every_kind_are_read_page_by_page(client, scanned):
    pages, _ = scanned
    kb = make_kb(client, "Photos", minScore=0, chunkStrategy="recursive", chunkSize=2000)
    tiff = io.BytesIO()
    pages[0].save(tiff, format="TIFF", save_all=True, append_images=[pages[0].rotate(-0.5, fillcolor=255)])
    for name, fmt in (("page.png", "PNG"), ("page.jpg", "JPEG"), ("page.webp", "WEBP"), ("page.bmp", "BMP")):
        out = io.BytesIO()
        pages[0].save(out, format=fmt)
        assert upload(client, kb, name, out.getvalue())["status"] == "completed", name
        assert any("200 cups" in c["text"] for c in chunks(client, kb, name)), name
    assert upload(client, kb, "two-pages.tiff", tiff.getvalue())["status"] == "completed"
    assert {c["metadata"]["page"] for c in chunks(client, kb, "two-pages.tiff")} == {1, 2}


def test_ocr_off_refuses_a_scan_and_a_language_not_installed_is_refused_at_save(client, scanned):
    pages, _ = scanned
    kb = make_kb(client, "No OCR", ocr="off")
    refused = upload(client, kb, "scan.pdf", scans.image_pdf(pages[:1]))
    assert refused["status"].startswith("failed") and "ocr 'off'" in refused["status"], refused
    bad = client.post(BASE, json={"name": "French", "embeddingProvider": "local", "ocrLanguages": ["fra"]})
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "$.ocrLanguages"
    assert "tesseract-ocr-fra" in bad.json()["errors"][0]["message"]


def test_german_is_read_with_its_language_pack(client):
    page = scans.scanned_pages(scans.printed(GERMAN))[0]
    kb = make_kb(client, "Reisen", minScore=0, ocrLanguages=["deu"], chunkStrategy="recursive", chunkSize=2000)
    assert upload(client, kb, "reise.png", scans.png(page))["status"] == "completed"
    text = " ".join(c["text"] for c in chunks(client, kb, "reise.png"))
    assert "Größere Gepäckstücke" in text and "Transportbox" in text


def _png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` × ``height`` pixels, with a few bytes of data: a pixel bomb."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" * 1024)) + chunk(b"IEND", b""))


def test_pixel_bombs_and_a_two_thousand_page_scan_are_refused_naming_their_setting(client):
    from PIL import Image

    kb = make_kb(client, "Bombs")
    bomb = upload(client, kb, "bomb.png", _png_declaring(100_000, 100_000))
    assert bomb["status"].startswith("failed") and "EDDI_RAG_MAX_IMAGE_PIXELS" in bomb["status"]
    assert "100,000 × 100,000" in bomb["status"]
    tiny = Image.new("L", (8, 8), 255)
    tiff, pdf = io.BytesIO(), io.BytesIO()
    tiny.save(tiff, format="TIFF", save_all=True, append_images=[tiny] * 1999)
    tiny.save(pdf, format="PDF", save_all=True, append_images=[tiny] * 1999)
    for name, data in (("scan.tiff", tiff.getvalue()), ("scan.pdf", pdf.getvalue())):
        refused = upload(client, kb, name, data)
        assert refused["status"].startswith("failed") and "EDDI_RAG_MAX_OCR_PAGES" in refused["status"], refused
        assert "2,000 pages to read by OCR" in refused["status"]
    assert client.get("/health").status_code == 200


def test_a_scan_being_read_shows_its_pages_and_a_cancel_stops_the_parse_and_tesseract(client, scanned):
    """OCR reports each page read as the job's progress; a cancel kills the parse process with its Tesseract run."""
    import psutil

    from tests.support.waiting import until

    pages, _ = scanned
    kb = make_kb(client, "Long scan")
    r = client.post(f"{BASE}/{kb}/ingest?documentName=long-scan.pdf", content=scans.image_pdf(pages * 12),
                    headers={"Content-Type": "application/pdf"})
    status_url = f"{BASE}/{kb}/ingestion/{r.json()['ingestionId']}/status"
    reading = until(lambda: (s := client.get(status_url).json()).get("progress", {}).get("done") and s, "OCR progress", 60)
    assert reading["progress"]["phase"] == "parsing" and reading["progress"]["unit"] == "pages"
    from eddi_rag.ingest import parse_workers

    workers = [p for p in psutil.Process().children(recursive=True) if p.name() in (parse_workers.BUSY, "tesseract")]
    assert workers, "no parse process runs"
    assert client.delete(f"{BASE}/{kb}/ingestion/{r.json()['ingestionId']}").json()["status"] == "cancelled"
    _, alive = psutil.wait_procs(workers, timeout=10)
    assert alive == [] and client.get(status_url).json()["status"] == "cancelled"


@pytest.mark.parametrize("turn", [90, 180, 270])
def test_a_page_scanned_sideways_or_upside_down_is_read_upright(client, scanned, turn):
    """Issue 45, point 2: a page scanned turned was read as garbage (confidence 0.36) and the warning advised a sharper
    scan. Its lines' boxes stay in the scanned image's pixels (where the page view marks them)."""
    pages, _ = scanned
    kb = make_kb(client, "Turned scans")
    turned = pages[0].rotate(turn, expand=True, fillcolor=255)  # (PIL turns counter-clockwise)
    done = upload(client, kb, f"turned-{turn}.png", scans.png(turned))
    assert done["status"] == "completed" and "warnings" not in done, done
    read = chunks(client, kb, f"turned-{turn}.png")
    assert "Descale the machine every 200 cups" in " ".join(" ".join(c["text"].split()) for c in read)
    assert all(c["metadata"]["ocrConfidence"] >= 0.7 for c in read)


def test_a_page_read_with_low_confidence_is_named_in_the_ingestion_s_warnings(client, scanned):
    """A blurred, low-resolution photo of a page is still read, and its ingestion says which page to check."""
    from PIL import ImageFilter

    pages, _ = scanned
    poor = pages[0].resize((pages[0].width // 2, pages[0].height // 2)).filter(ImageFilter.GaussianBlur(3))
    kb = make_kb(client, "Phone photos")
    done = upload(client, kb, "blurred.png", scans.png(poor))
    assert done["status"] == "completed", done
    assert done["warnings"] == ["OCR read page(s) 1 with confidence below 0.7: their text may be wrong. Likely causes: "
                                "a blurred or low-resolution scan (300 dpi reads better), text in a language ocrLanguages "
                                "does not name (this knowledge base reads eng), or handwriting"]
    sharp = upload(client, kb, "sharp.png", scans.png(pages[0]))
    assert sharp["status"] == "completed" and "warnings" not in sharp
