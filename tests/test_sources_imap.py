"""An imap source against a real Dovecot (Debian's dovecot-imapd on loopback, tests/support/dovecot.py): mails with
their attachments ingested and cited ``mail > attachment``, a sender allowlist, then through the cursor a new mail
added and a deleted one removed without reading the others, a renumbered folder (new UIDVALIDITY) listed again, and a
refused login failing the run without showing the password."""

from __future__ import annotations

import json

import pytest

from eddi_rag.common.citations import source_label
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.knowledge_bases import ConfigValidationError
from eddi_rag.verbs.search import SearchRequest
from tests.support import files
from tests.support.documents import mail
from tests.support.dovecot import PASSWORD, USER, dovecot
from tests.support.kbs import make_kb

pytestmark = pytest.mark.integration


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_VAULT_MAIL_PASSWORD", PASSWORD)
    with dovecot() as box:
        imap = box.client()
        imap.create_folder("Reports")
        imap.append("INBOX", mail("Quarterly report", "The report is attached.", (
            ("report.pdf", files.pdf(["Revenue grew by 12 percent in the third quarter."]), "application/pdf"),),
            sender="Carol <carol@acme.example>").as_bytes())
        imap.append("INBOX", mail("Canteen", "The canteen opens at noon on Fridays.", sender="dave@acme.example").as_bytes())
        imap.append("INBOX", mail("Win a prize", "Click here to win a cruise.", sender="spam@elsewhere.example").as_bytes())
        imap.append("Reports", mail("Travel policy", "Trains are booked in second class.", sender="hr@acme.example").as_bytes())
        runtime = Runtime(tmp_path / "data")
        kb = make_kb(runtime, chunkStrategy="markdown", minScore=0, sources=[{
            "name": "Mail", "type": "imap", "settings": {"tombstoneAfterMissedRuns": 1},
            "imap": {"host": box.host, "port": box.port, "useTls": False, "username": USER,
                     "password": "${eddivault:MAIL_PASSWORD}", "folders": ["INBOX", "Reports"], "senders": ["@acme.example"]}}])
        yield runtime, kb, imap
        imap.logout()
        runtime.close()


def sources(runtime: Runtime, kb: str) -> set[str]:
    return {c.metadata["source"] for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None)}


def test_a_mailbox_is_ingested_with_its_attachments_cited_inside_the_mail(world):
    runtime, kb, imap = world
    run = runtime.sources.run(kb, "mail")
    assert (run.status, run.added, run.failed) == ("COMPLETED", 3, 0), run.error
    assert sources(runtime, kb) == {"INBOX/Quarterly report.eml", "INBOX/Canteen.eml", "Reports/Travel policy.eml"}
    (hit, *_) = runtime.search.hits(SearchRequest(kb, "How much did revenue grow?"))
    assert source_label(hit.metadata) == "INBOX/Quarterly report.eml > report.pdf, page 1"
    assert hit.metadata["sender"].endswith("carol@acme.example>") and hit.metadata["folder"] == "INBOX"


def test_through_the_cursor_a_new_mail_is_added_and_a_deleted_one_removed(world):
    runtime, kb, imap = world
    runtime.sources.run(kb, "mail")
    cursor = json.loads(runtime.sources.cursor(kb, "mail"))
    assert set(cursor["folders"]) == {"INBOX", "Reports"} and len(cursor["folders"]["INBOX"]["seen"]) == 3
    imap.select_folder("INBOX")
    imap.delete_messages(imap.search(["SUBJECT", "Canteen"]))
    imap.expunge()
    imap.append("INBOX", mail("Parking", "The car park closes at 20:00.", sender="facilities@acme.example").as_bytes())
    delta = runtime.sources.run(kb, "mail")
    assert (delta.added, delta.deleted, delta.unchanged, delta.updated) == (1, 1, 2, 0)
    assert sources(runtime, kb) == {"INBOX/Quarterly report.eml", "INBOX/Parking.eml", "Reports/Travel policy.eml"}

    imap.delete_folder("Reports")  # made again: a new UIDVALIDITY, every UID renumbered
    imap.create_folder("Reports")
    imap.append("Reports", mail("Travel policy", "Trains are booked in first class.", sender="hr@acme.example").as_bytes())
    again = runtime.sources.run(kb, "mail")
    assert again.status == "COMPLETED" and "cursor was no longer valid" in again.message, again.error
    assert (again.added, again.deleted) == (1, 1)  # (no Message-ID given: the renumbered mail is a new document)
    assert "first class" in " ".join(c.text for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None))



def test_a_renumbered_folder_reads_only_headers_of_the_mails_it_already_holds(world, monkeypatch):
    """Issue 58, finding 8: after a UIDVALIDITY change every body was downloaded again; a mail with its Message-ID,
    size and Date unchanged is now known from its headers."""
    from eddi_rag.sources.connectors import imap as connector

    runtime, kb, imap = world
    for subject, body in (("Budget", "The budget rises by 4 percent."), ("Rota", "The night rota starts on Monday.")):
        message = mail(subject, body, sender="hr@acme.example")
        message["Message-ID"] = f"<{subject.lower()}@acme.example>"
        imap.append("Reports", message.as_bytes())
    assert runtime.sources.run(kb, "mail").added == 5
    imap.select_folder("Reports")
    saved = list(imap.fetch(imap.search("ALL"), ["RFC822"]).values())
    imap.select_folder("INBOX")  # (Dovecot drops a session whose selected folder is deleted)
    imap.delete_folder("Reports")  # made again with the same mails: a new UIDVALIDITY, every UID renumbered
    imap.create_folder("Reports")
    for m in saved:
        imap.append("Reports", m[b"RFC822"])
    bodies: list[int] = []
    original = connector._reader
    monkeypatch.setattr(connector, "_reader", lambda client, uid: (lambda: bodies.append(uid) or original(client, uid)()))
    again = runtime.sources.run(kb, "mail")
    assert again.status == "COMPLETED" and "cursor was no longer valid" in again.message, again.error
    assert again.unchanged >= 2 and len(bodies) == 1  # the two with a Message-ID known by their headers; the third read

def test_a_refused_login_fails_the_run_without_the_password_and_a_bad_host_is_named(world, monkeypatch):
    runtime, kb, imap = world
    monkeypatch.setenv("EDDI_VAULT_MAIL_PASSWORD", "not-the-password")
    failed = runtime.sources.run(kb, "mail")
    assert failed.status == "FAILED" and f"refused the login of {USER!r}" in failed.error
    assert "not-the-password" not in json.dumps(runtime.sources.runs(kb, "mail"))
    with pytest.raises(ConfigValidationError) as missing:
        make_kb(runtime, sources=[{"name": "M", "type": "imap", "imap": {"host": "127.0.0.1"}}])
    assert "username" in str(missing.value)


def test_tls_asked_of_a_plain_port_says_so(world, tmp_path):
    """Issue 58, finding 8: TLS against Dovecot's plain-text port said only OpenSSL's WRONG_VERSION_NUMBER."""
    runtime, kb, _ = world
    source = {**runtime.catalog.read("rags", kb)["sources"][0]}
    tls = make_kb(runtime, "tls", sources=[{**source, "name": "Mail TLS", "imap": {**source["imap"], "useTls": True}}])
    failed = runtime.sources.run(tls, "mail")
    assert failed.status == "FAILED" and "this port does not speak TLS" in failed.error, failed.error


def test_nothing_listening_names_the_ports_imap_uses(world):
    """Issue 67, point 13: a port where nothing listens said a bare "ConnectionRefusedError … Connection refused"."""
    from tests.support.ports import free_port

    runtime, kb, _ = world
    source = {**runtime.catalog.read("rags", kb)["sources"][0]}
    port = free_port()
    closed = make_kb(runtime, "closed", sources=[{**source, "name": "Mail", "imap": {**source["imap"], "port": port}}])
    failed = runtime.sources.run(closed, "mail")
    assert failed.status == "FAILED" and f"Nothing listens on port {port} of 127.0.0.1" in failed.error, failed.error
    assert "993 with TLS (useTls: true) or on 143 without (useTls: false)" in failed.error
    said = next(c for c in runtime.health.verdict(closed)["checks"] if c["check"] == "sources")
    assert said["fix"].startswith("correct the source's host, port and useTls (IMAP listens on port 993"), said
    assert said["fix"].endswith("then press Run on the source's card (Documents: Sources)")
    assert runtime.sources.runs(closed, "mail")[0]["fix"] == failed.fix  # kept with the run


def test_a_subject_in_raw_windows_1252_keeps_its_letters(world):
    """Issue 58, finding 8: an old mailer's subject in raw 8-bit windows-1252 (no RFC 2047 encoding) became U+FFFD in
    the document's name and its citation; German and Chinese (raw UTF-8) beside it."""
    runtime, kb, imap = world
    for subject, charset in (("Grüße aus Köln", "cp1252"), ("会议纪要", "utf-8")):
        imap.append("INBOX", b"From: Andr\xe9 <andre@acme.example>\r\nSubject: " + subject.encode(charset) +
                    b"\r\nMessage-ID: <" + subject.encode("utf-8").hex().encode() + b"@acme.example>\r\n"
                    b"Content-Type: text/plain; charset=utf-8\r\n\r\nThe canteen menu changes on Monday.\r\n")
    run = runtime.sources.run(kb, "mail")
    assert run.status == "COMPLETED", run.error
    assert {"INBOX/Grüße aus Köln.eml", "INBOX/会议纪要.eml"} <= sources(runtime, kb)
    chunks = runtime.stores.get(kb, runtime.rag_config(kb)).get({"source": "INBOX/Grüße aus Köln.eml"})
    assert {c.metadata["subject"] for c in chunks} == {"Grüße aus Köln"} and chunks[0].metadata["sender"].startswith("André")
