"""Where on the page (issue 32, points 3 and 4): every chunk of a PDF or an image keeps its page and the boxes it
came from (fractions of the page, origin top left); REST results, the chunks list and the injected sources carry
them; the server draws the page (``GET …/page``) for the Manager to mark the place on; and a scan's headings, found
by their size and numbering, become the same ``section`` path a digital page's do.

The boxes are checked against the page itself: the text pdfium finds inside a chunk's box on the digital page is
that chunk's text, and a scan of the same page puts the same chunk in the same place."""

from __future__ import annotations

import io

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime
from tests.support import scans
from tests.support.kbs import make_kb
from tests.support.waiting import ingestion_ended

pytestmark = pytest.mark.integration  # Chromium prints; pdfium and Tesseract read in the parse process

BASE = "/ragstore/rags"
MANUAL = """# Espresso EX-9 Manual

## 1. Safety Procedures

Always unplug the machine before cleaning it. Keep children away from the steam wand, which reaches 130 degrees
while it is in use.

## 2. Setup

Fill the water tank to the MAX mark with fresh cold water and switch the machine on with the main switch at the
back. Wait until the orange light stops blinking before the first coffee.

## 3. Warranty

The warranty lasts 36 months from the date of purchase and covers the pump and the heating element.
"""


@pytest.fixture(scope="module")
def manual():
    """(the digital PDF, its first page scanned as an image-only PDF)."""
    digital = scans.printed(MANUAL)
    return digital, scans.image_pdf(scans.scanned_pages(digital, turn=0.3))


@pytest.fixture
def client(tmp_path):
    with Runtime(tmp_path / "data") as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        yield client


@pytest.fixture(scope="module")
def library(manual, tmp_path_factory):
    """(client, kb): a knowledge base with every default holding the manual, its scan and a Markdown note, ingested
    once for the tests that only read it."""
    digital, scanned = manual
    with Runtime(tmp_path_factory.mktemp("library")) as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        kb = make_kb(client, "Manual", minScore=0)
        upload(client, kb, "manual.pdf", digital)
        upload(client, kb, "manual-scan.pdf", scanned)
        upload(client, kb, "notes.md", b"# Notes\n\nNo pages here.")
        yield client, kb


def upload(client, kb: str, name: str, data: bytes) -> None:
    r = client.post(f"{BASE}/{kb}/ingest?documentName={name}&replace=true", content=data, headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 202, r.text
    assert ingestion_ended(client, f"{BASE}/{kb}/ingestion/{r.json()['ingestionId']}/status")["status"] == "completed"


def chunk_list(client, kb: str, name: str) -> list[dict]:
    r = client.get(f"{BASE}/{kb}/chunks", params={"documentId": name})
    assert r.status_code == 200, r.text
    return r.json()["chunks"]


def words(text: str) -> set[str]:
    """The words of a chunk's text, without its heading path (``# Manual > ## 2. Setup``: the path, not the page)."""
    body = "\n".join(line for line in text.split("\n") if not line.startswith("#"))
    return {w.strip(".,:;()").lower() for w in body.split() if len(w) > 3}


def text_in(pdf: bytes, page: int, box: list[float]) -> str:
    """What pdfium reads inside ``box`` (fractions of the page, origin top left) on the digital page."""
    import pypdfium2 as pdfium

    doc = pdfium.PdfDocument(pdf)
    try:
        width, height = doc[page - 1].get_size()
        left, top, right, bottom = box
        return doc[page - 1].get_textpage().get_text_bounded(left * width - 1, height - bottom * height - 1,
                                                             right * width + 1, height - top * height + 1)
    finally:
        doc.close()


def test_each_chunk_s_boxes_hold_its_text_and_a_scan_puts_it_in_the_same_place(library, manual):
    client, kb = library  # every default: markdown chunks
    digital, _ = manual
    printed = chunk_list(client, kb, "manual.pdf")
    assert printed and all(c["page"] == 1 and c["boxes"] for c in printed)
    for c in printed:
        assert all(0 <= b[0] < b[2] <= 1 and 0 <= b[1] < b[3] <= 1 for b in c["boxes"])
        inside = " ".join(text_in(digital, 1, b) for b in c["boxes"])
        assert words(c["text"]) <= words(inside), (c["text"], inside)

    setup = next(c for c in printed if "orange light" in c["text"])
    seen = next(c for c in chunk_list(client, kb, "manual-scan.pdf") if "orange light" in c["text"])
    assert covered(seen["boxes"], setup["boxes"]) and covered(setup["boxes"], seen["boxes"]), (seen["boxes"], setup["boxes"])


def covered(these: list[list[float]], by: list[list[float]], slack: float = 0.01) -> bool:
    """Whether the middle of each of ``these`` boxes lies inside one of ``by``."""
    def inside(box: list[float]) -> bool:
        x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
        return any(b[0] - slack <= x <= b[2] + slack and b[1] - slack <= y <= b[3] + slack for b in by)
    return all(inside(box) for box in these)


def test_a_scan_s_numbered_and_larger_headings_become_sections(client, manual):
    _, scanned = manual
    kb = make_kb(client, "Scans", minScore=0, chunkStrategy="recursive", chunkSize=400, chunkOverlap=0)
    upload(client, kb, "manual-scan.pdf", scanned)
    found = client.post(f"{BASE}/{kb}/query", json={"query": "How long is the warranty?", "maxResults": 1}).json()["results"][0]
    assert "36 months" in found["text"]
    assert found["metadata"]["section"] == "# Espresso EX-9 Manual > ## 3. Warranty"
    assert found["metadata"]["ocr"] is True and found["metadata"]["boxes"]


def test_the_results_and_the_injected_sources_carry_the_place(library):
    client, kb = library
    hit = client.post(f"{BASE}/{kb}/query", json={"query": "steam wand temperature", "maxResults": 1}).json()["results"][0]
    assert hit["metadata"]["page"] == 1 and hit["metadata"]["boxes"]
    sources = client.post(f"{BASE}/{kb}/context", json={"query": "steam wand temperature"}).json()["sources"]
    assert sources[0]["page"] == 1 and sources[0]["boxes"] == hit["metadata"]["boxes"]


def test_the_server_draws_a_page_and_refuses_what_it_cannot_show(library):
    from PIL import Image

    client, kb = library
    for name in ("manual.pdf", "manual-scan.pdf"):
        r = client.get(f"{BASE}/{kb}/page", params={"documentId": name, "page": 1, "width": 600})
        assert r.status_code == 200 and r.headers["content-type"] == "image/png"
        image = Image.open(io.BytesIO(r.content))
        assert image.width == 600 and 700 < image.height < 800  # a Letter page's proportions
    past = client.get(f"{BASE}/{kb}/page", params={"documentId": "manual.pdf", "page": 9})
    assert past.status_code == 404 and "has no page 9 (it has 1)" in past.json()["error"]
    assert client.get(f"{BASE}/{kb}/page", params={"documentId": "nothing.pdf", "page": 1}).status_code == 404
    wide = client.get(f"{BASE}/{kb}/page", params={"documentId": "manual.pdf", "page": 1, "width": 50_000})
    assert wide.status_code == 422 and "width" in wide.text
    text = client.get(f"{BASE}/{kb}/page", params={"documentId": "notes.md", "page": 1})
    assert text.status_code in (404, 409) and "page" in text.json()["error"]


@pytest.mark.browser
def test_the_manager_shows_the_page_with_the_chunk_s_place_marked(browser, server, manual):
    """The document page and Try it: "Show on page" opens the page the server drew, the chunk's region drawn over
    it where its text is (the screenshot's pixels there are tinted, the margin around them is not)."""
    import httpx
    from PIL import Image
    from selenium.webdriver.common.by import By

    from tests.support.browser import no_page_errors, screenshot, visible, wait

    url, runtime = server
    digital, _ = manual
    kb = make_kb(runtime, "Manual", minScore=0, chunkStrategy="recursive", chunkSize=250, chunkOverlap=0)
    with httpx.Client(base_url=url, timeout=30) as http:
        upload(http, kb, "manual.pdf", digital)
        setup = next(c for c in chunk_list(http, kb, "manual.pdf") if "orange light" in c["text"])

    def shown(figure) -> None:
        """The page image loaded and each region over it, inside it, tinted where it is and white in the margin."""
        image = figure.find_element(By.TAG_NAME, "img")
        wait(browser).until(lambda d: d.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", image))
        regions = figure.find_elements(By.CSS_SELECTOR, ".region")
        assert regions and all(r.size["width"] > 20 and r.size["height"] > 5 for r in regions)
        frame = image.rect
        for r in regions:
            box = r.rect
            assert frame["x"] - 1 <= box["x"] and box["x"] + box["width"] <= frame["x"] + frame["width"] + 1
            assert frame["y"] - 1 <= box["y"] and box["y"] + box["height"] <= frame["y"] + frame["height"] + 1
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", regions[0])
        region, page = (browser.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width, r.height]", e)
                        for e in (regions[0], image))
        shot = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")
        scale = browser.execute_script("return window.devicePixelRatio")
        y = round((region[1] + region[3] / 2) * scale)
        tinted = [shot.getpixel((round((region[0] + region[2] * f / 10) * scale), y)) for f in range(1, 10)]
        assert sum(p[2] for p in tinted) / len(tinted) < sum(p[0] for p in tinted) / len(tinted) - 40, tinted  # yellow over the text
        assert shot.getpixel((round((page[0] + 6) * scale), y)) == (255, 255, 255)  # the page's margin beside it, untouched

    browser.get(f"{url}/ui/kbs/{kb}/document?d=manual.pdf")
    row = visible(browser, f'tr[data-chunk="{setup["id"]}"]')
    row.find_element(By.CSS_SELECTOR, "details.on-page summary").click()
    shown(visible(browser, f'tr[data-page-of="{setup["id"]}"] figure.page-view'))
    screenshot(browser, "page-place-document")

    browser.get(f"{url}/ui/kbs/{kb}/try")
    browser.find_element(By.ID, "question").send_keys("When can I make the first coffee?")
    browser.find_element(By.CSS_SELECTOR, "#ask button[type=submit]").click()
    first = visible(browser, "ol.hits > li")
    assert "orange light" in first.text
    first.find_element(By.CSS_SELECTOR, "details.on-page summary").click()
    shown(visible(browser, "ol.hits > li figure.page-view"))
    screenshot(browser, "page-place-try-it")
    no_page_errors(browser)


def test_a_page_that_opens_with_its_own_heading_is_filed_under_it():
    """Issue 45: a PDF page beginning with its own heading was filed under the previous page's heading (and its chunk
    began with that heading's path)."""
    from eddi_rag.config import RagConfiguration
    from eddi_rag.ingest.chunking import split_parts
    from eddi_rag.ingest.limits import DocumentLimits
    from eddi_rag.ingest.parsing import parse

    guide = scans.printed("# Staff guide\n\n## Part one: leave\n\nParents get fourteen weeks of paid leave.\n\n"
                          '<div style="break-before: page"></div>\n\n## Part two: travel\n\nTrains are booked in second class.\n'
                          '<div style="break-before: page"></div>\n\n## Part three: meals\n\nLunch is served at noon.\n\n'
                          "## Part four: parking\n\nThe car park opens at seven.\n")
    parts = parse("pdf", guide, "guide.pdf", {"chars": 4000}, DocumentLimits(), None, lambda: False,
                  {"mode": "auto", "languages": ["eng"]})
    split = split_parts(parts, RagConfiguration(name="g", embeddingProvider="local"))
    pieces = {p.citation["page"]: p for p in split}
    # a page of two sections is two chunks, each under its own (a small file's sections are its units)
    assert [p.section for p in split if p.citation["page"] == 3] == ["# Staff guide > ## Part three: meals",
                                                                     "# Staff guide > ## Part four: parking"]
    assert pieces[2].section == "# Staff guide > ## Part two: travel", pieces[2].section
    assert pieces[2].text.startswith("# Staff guide\n\n## Part two: travel") and "Part one" not in pieces[2].text
    # page 1 holds only part one, right under the title: it is filed under both (issue 67, point 16)
    assert pieces[1].section == "# Staff guide > ## Part one: leave", pieces[1].section
