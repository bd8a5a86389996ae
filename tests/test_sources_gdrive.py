"""A gdrive source against a fake of Google's Drive API v3 and the Admin SDK at their HTTP boundary
(tests/support/fake_drive.py: a service account's signed JWT exchanged for a token, files, exports, permissions, the
change feed, group members): a Google Doc exported and a file downloaded, then changes through the start page token
(changed, added, trashed; nothing else read), permissions to ACLs by e-mail, group and domain and a permission change
reaching the next query without embedding, a rejected token relisting, throttling obeyed, a bad key named."""

from __future__ import annotations

import pytest

from eddi_rag.common.principals import Reader
from eddi_rag.runtime import Runtime
from eddi_rag.sources.connectors.gdrive import acl_of
from tests.support.fake_drive import DOC, FakeDrive
from tests.support.kbs import make_kb, sources_held, sources_read

pytestmark = pytest.mark.integration

HR = [{"type": "group", "emailAddress": "HR@acme.example"}]
DOMAIN = [{"type": "domain", "domain": "acme.example"}]


@pytest.fixture
def world(tmp_path, monkeypatch):
    with FakeDrive(page_size=2) as drive:
        monkeypatch.setenv("EDDI_VAULT_DRIVE_KEY", drive.key)
        drive.put("Leave policy", b"<html><body><h1>Leave</h1><p>Staff take 30 days of annual leave.</p></body></html>",
                  DOC, HR)
        drive.put("canteen.md", b"# Canteen\n\nThe canteen opens at noon.\n", permissions=DOMAIN)
        drive.put("salaries.md", b"# Salaries\n\nSalary bands rise by three percent.\n",
                  permissions=[{"type": "user", "emailAddress": "carol@acme.example"}])
        drive.groups["hr@acme.example"] = ["ann@acme.example"]
        runtime = Runtime(tmp_path / "data")
        kb = make_kb(runtime, chunkStrategy="markdown", minScore=0, audience="DOCUMENT_ACL", sources=[{
            "name": "Drive", "type": "gdrive", "settings": {"tombstoneAfterMissedRuns": 1},
            "gdrive": {"credentials": "${eddivault:DRIVE_KEY}", "apiUrl": drive.url, "adminUrl": drive.url}}])
        yield runtime, kb, drive
        runtime.close()


names, read = sources_held, sources_read


def downloads(drive: FakeDrive) -> list[str]:
    return [r for r in drive.requests if "alt=media" in r or "/export" in r]


def test_a_drive_is_synced_then_followed_through_its_change_feed(world):
    runtime, kb, drive = world
    first = runtime.sources.run(kb, "drive")
    assert (first.status, first.added, first.failed) == ("COMPLETED", 3, 0), first.error
    assert names(runtime, kb) == {"Leave policy.html", "canteen.md", "salaries.md"}
    leave = next(c for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None) if c.metadata["source"] == "Leave policy.html")
    assert "30 days of annual leave" in leave.text and leave.metadata["url"].startswith("https://drive.google.com/file/d/")

    drive.requests.clear()
    drive.put("canteen.md", b"# Canteen\n\nThe canteen opens at one o'clock.\n", permissions=DOMAIN)
    drive.put("travel.md", b"# Travel\n\nTrains are booked in second class.\n", permissions=DOMAIN)
    drive.trash("salaries.md")
    delta = runtime.sources.run(kb, "drive")
    assert (delta.added, delta.updated, delta.deleted, delta.seen) == (1, 1, 1, 2)
    assert len(downloads(drive)) == 2
    assert names(runtime, kb) == {"Leave policy.html", "canteen.md", "travel.md"}
    assert not any("/drive/v3/files?" in r for r in drive.requests)  # the change feed, not a listing

    drive.requests.clear()
    quiet = runtime.sources.run(kb, "drive")
    assert (quiet.seen, quiet.added, quiet.deleted) == (0, 0, 0) and downloads(drive) == []


def test_permissions_by_email_group_and_domain_and_a_change_reaches_the_next_query(world):
    runtime, kb, drive = world
    runtime.sources.run(kb, "drive")
    runtime.sources.sync_permissions(kb, "drive")
    ann, carol = Reader("ann@acme.example"), Reader("u-carol", (), "carol@acme.example")
    assert runtime.groups.of("default", "ann@acme.example") == ["hr@acme.example"]  # from the Admin SDK
    assert "Leave policy.html" in read(runtime, kb, ann, "annual leave")
    assert "salaries.md" in read(runtime, kb, carol, "salary bands") and "salaries.md" not in read(runtime, kb, ann, "salary bands")
    assert "canteen.md" in read(runtime, kb, Reader("bob@acme.example"), "canteen opens")  # the domain: every signed-in user

    drive.requests.clear()
    drive.share("salaries.md", HR)
    synced = runtime.sources.sync_permissions(kb, "drive")
    assert (synced.updated, synced.unchanged, synced.embedded) == (1, 2, 0) and downloads(drive) == []
    assert "salaries.md" in read(runtime, kb, ann, "salary bands")
    assert "salaries.md" not in read(runtime, kb, carol, "salary bands")


def test_a_rejected_change_token_relists_and_throttling_is_waited_out(world):
    runtime, kb, drive = world
    runtime.sources.run(kb, "drive")
    drive.rejected.add(runtime.sources.cursor(kb, "drive"))
    drive.put("travel.md", b"# Travel\n\nTrains are booked in second class.\n", permissions=DOMAIN)
    drive.throttle["/drive/v3/files"] = 1
    drive.requests.clear()
    again = runtime.sources.run(kb, "drive")
    assert again.status == "COMPLETED" and "cursor was no longer valid" in again.message, again.error
    assert (again.added, again.unchanged, again.deleted) == (1, 3, 0) and len(downloads(drive)) == 1  # versions: not read
    assert "Google Drive throttled the sync: 1 s" in again.message


def test_a_key_that_is_no_service_account_is_named(world, monkeypatch):
    runtime, kb, drive = world
    monkeypatch.setenv("EDDI_VAULT_DRIVE_KEY", '{"type": "authorized_user"}')
    failed = runtime.sources.run(kb, "drive")
    assert failed.status == "FAILED" and "gdrive.credentials: not a service account's JSON key" in failed.error


def test_drive_permissions_map_to_principals():
    assert acl_of([{"type": "user", "emailAddress": "Ann@Acme.example"}, {"type": "group", "emailAddress": "hr@acme.example"},
                   {"type": "domain", "domain": "acme.example"}, {"type": "anyone"}]) == \
        ["email:ann@acme.example", "group:hr@acme.example", "link:organization", "public"]
