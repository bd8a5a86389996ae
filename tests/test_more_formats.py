"""The formats people send (issue 32, point 5): mail (``.eml`` and Outlook ``.msg``) with its sender, recipients,
date and subject on every chunk and each attachment read and cited inside it (``mail.eml > report.odt``); EPUB;
OpenDocument text, spreadsheet and presentation; RTF. Each is detected from its bytes as an upload is, read in
the limited parse process, and cited as the existing formats are. The files are written at run time by real
tools (``tests/support/documents.py``)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.ingest import loaders
from eddi_rag.runtime import Runtime
from tests.support import documents
from tests.support.kbs import make_kb
from tests.support.waiting import ingestion_ended

pytestmark = pytest.mark.integration  # read in the parse process

BASE = "/ragstore/rags"


@pytest.fixture
def client(tmp_path):
    with Runtime(tmp_path / "data") as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        client.runtime = runtime
        yield client


def ingested(client, kb: str, name: str, data: bytes) -> dict:
    r = client.post(f"{BASE}/{kb}/ingest?documentName={name}&replace=true", content=data,
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 202, r.text
    return ingestion_ended(client, f"{BASE}/{kb}/ingestion/{r.json()['ingestionId']}/status")


def hit(client, kb: str, question: str) -> dict:
    return client.post(f"{BASE}/{kb}/query", json={"query": question, "maxResults": 1}).json()["results"][0]


def quarterly() -> documents.EmailMessage:
    forwarded = documents.mail("Fwd: rollout plan", "The rollout plan is attached.",
                               (("plan.rtf", documents.rtf(["Phase one of the rollout starts in May in Hamburg."]), "application/rtf"),))
    return documents.mail(
        "Quarterly report", "Hi Bob,\n\nthe report is attached; the numbers are in its table.\n",
        (("report.odt", documents.odt([("h1", "Report"), ("h2", "Revenue"), ("p", "Revenue grew by 12 percent to 4.2 million euros.")]),
          "application/vnd.oasis.opendocument.text"),
         ("forwarded.eml", forwarded, "message/rfc822"),
         ("tool.bin", b"\x00\x01\x02\x03 a binary of no known type", "application/octet-stream")),
        cc="Carol Example <carol@example.com>")


@pytest.mark.parametrize("name", ["quarterly.eml", "quarterly.msg"])
def test_a_mail_s_attachments_are_read_and_cited_inside_it_with_its_headers_on_every_chunk(client, name):
    message = quarterly()
    data = documents.outlook(message) if name.endswith(".msg") else message.as_bytes()
    kb = make_kb(client, "Mail", minScore=0, chunkStrategy="recursive", chunkSize=300, chunkOverlap=0)
    assert ingested(client, kb, name, data)["status"] == "completed"

    revenue = hit(client, kb, "How much did revenue grow?")
    assert "12 percent" in revenue["text"]
    assert revenue["citation"] == f"{name} > report.odt, # Report > ## Revenue"
    meta = revenue["metadata"]
    assert meta["sender"] == "Alice Example <alice@example.com>" and meta["subject"] == "Quarterly report"
    assert meta["recipients"] == "bob@example.com, Carol Example <carol@example.com>"
    assert meta["sentAt"].startswith("2026-11-24T")

    plan = hit(client, kb, "When does phase one of the rollout start?")
    assert "May in Hamburg" in plan["text"] and plan["citation"] == f"{name} > forwarded.eml > plan.rtf"

    body = hit(client, kb, "Where are the numbers of the report?")
    assert body["citation"] == f"{name}, # Quarterly report"
    # issue 45: the passage around a mail's body was labelled with its attachment's pages; each part in its own terms
    assert body["passageCitation"].startswith(f"{name}, # Quarterly report + report.odt, # Report + "), body["passageCitation"]
    own = "\n".join(c["text"] for c in client.get(f"{BASE}/{kb}/chunks", params={"documentId": name}).json()["chunks"])
    assert "Attachments: report.odt, forwarded.eml, tool.bin" in own
    assert "Not read: tool.bin (" in own  # named, not silently dropped


def test_a_mail_is_recognised_without_its_name_and_a_mail_s_limits_hold(client):
    data = quarterly().as_bytes()
    assert loaders.detect(data) == "mail" and loaders.detect(b"Title: notes\nAuthor: me\n\nplain text") == "text"
    from eddi_rag.ingest.limits import DocumentLimits
    from eddi_rag.ingest.parsing import parse

    tight = DocumentLimits(max_unzipped_mb=1)
    big = documents.mail("Big", "See the sheet.", (("big.ods", documents.ods({"Data": [["n"]] + [[str(i) * 400] for i in range(4000)]}),
                                                     "application/vnd.oasis.opendocument.spreadsheet"),))
    # an attachment over a limit is skipped and named with its limit; the mail's own text is read (issue 42)
    (own,) = parse("mail", big.as_bytes(), "big.eml", {"chars": 1000}, tight)
    assert "See the sheet." in own.text and "big.ods" in own.text and "EDDI_RAG_MAX_UNZIPPED_MB" in own.text


def test_epub_opendocument_and_rtf_are_read_with_their_citations(client):
    kb = make_kb(client, "Books", minScore=0, chunkStrategy="recursive", chunkSize=300, chunkOverlap=0)
    files = {
        "guide.epub": documents.epub_book("Rail guide", [
            ("Tickets", "<p>Tickets are sold online and at the station.</p><h2>Refunds</h2><p>Refunds take seven days.</p>"),
            ("Dogs", "<p>Small dogs travel free in a basket.</p>")]),
        "handbook.odt": documents.odt([("h1", "Handbook"), ("h2", "Billing"), ("p", "Invoices go out on the first of the month."),
                                       ("h2", "Support"), ("p", "Call the hotline at 555 0100.")]),
        "stock.ods": documents.ods({"Stocks": [["Item", "Count"], ["Bolts", "120"], ["Washers", "75"]]}),
        "deck.odp": documents.odp([("Welcome", "The agenda for today", "Greet the guests"), ("Results", "Revenue grew 12 percent", "")]),
        "memo.rtf": documents.rtf(["Caf\u00e9 opening hours are 8 to 6 on weekdays."]),
    }
    for name, data in files.items():
        assert loaders.detect(data, None, name) == name.rsplit(".", 1)[1]
        assert ingested(client, kb, name, data)["status"] == "completed", name
    assert hit(client, kb, "How long do refunds take?")["citation"] == "guide.epub, # Tickets > ## Refunds"
    assert hit(client, kb, "Do dogs travel free?")["metadata"]["chapter"] == 3  # (the book's nav page is chapter 1)
    assert hit(client, kb, "When do invoices go out?")["citation"] == "handbook.odt, # Handbook > ## Billing"
    washers = hit(client, kb, "How many washers are in stock?")
    assert "Washers" in washers["text"] and washers["citation"].startswith("stock.ods, Stocks!A")
    results = hit(client, kb, "How much did revenue grow?")
    assert results["citation"] == "deck.odp, slide 2" and results["metadata"]["slideTitle"] == "Results"
    assert "Notes: Greet the guests" in hit(client, kb, "What is on the agenda today?")["text"]
    assert "Café opening hours" in hit(client, kb, "When is the cafe open?")["text"]


def test_a_corrupt_file_of_each_new_format_fails_with_its_reason(client):
    kb = make_kb(client, "Broken", minScore=0)
    for name, data in (("broken.odt", documents.odt([("p", "x")])[:400]), ("broken.epub", documents.epub_book("x", [("a", "<p>b</p>")])[:300]),
                       ("broken.msg", b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 600)):
        status = ingested(client, kb, name, data)["status"]
        assert status.startswith(f"failed: {name}: corrupt or unreadable"), status
    assert client.get("/health").status_code == 200


def test_an_odp_slide_s_shapes_lists_and_table_cells_are_each_read_apart(client):
    """Issue 45: ODP custom shapes and master-page footers were not read, and a frame's list items and table cells ran
    together."""
    kb = make_kb(client, "Event", minScore=0)
    assert ingested(client, kb, "event.odp", documents.odp_shapes())["status"] == "completed"
    (chunk,) = client.runtime.stores.get(kb, client.runtime.rag_config(kb)).get({"source": "event.odp"})
    assert "Callout: doors open at nine." in chunk.text
    assert "- Coffee in the lobby\n- Lunch on the terrace" in chunk.text
    assert "Room: Hall A\nCapacity: 120" in chunk.text
    assert "Footer: Acme confidential" in chunk.text  # (the master page's footer, as the slide declares it)


def test_an_odt_with_a_formula_is_read_around_it(client):
    """Issue 45: LibreOffice Math's objects name their DTD; odfpy's safe parser refused the reference and the whole
    document failed as corrupt."""
    kb = make_kb(client, "Physics", minScore=0)
    data = documents.odt_with_formula("Mass and energy are equivalent.", "The constant is the speed of light squared.")
    status = ingested(client, kb, "physics.odt", data)
    assert status["status"] == "completed", status
    stored = client.runtime.stores.get(kb, client.runtime.rag_config(kb)).get({"source": "physics.odt"})
    text = " ".join(c.text for c in stored)
    assert "Mass and energy are equivalent." in text and "speed of light squared" in text


def test_a_mail_s_chunks_list_names_the_attachment_each_chunk_is_in(client):
    kb = make_kb(client, "Mail", minScore=0, chunkStrategy="recursive", chunkSize=300, chunkOverlap=0)
    ingested(client, kb, "quarterly.eml", quarterly().as_bytes())
    where = [c["where"] for c in client.get(f"{BASE}/{kb}/chunks", params={"documentId": "quarterly.eml"}).json()["chunks"]]
    assert "# Quarterly report" in where and "report.odt, # Report > ## Revenue" in where
    assert "forwarded.eml > plan.rtf" in where
