"""A confluence source against a fake of Confluence Cloud's REST API at its HTTP boundary
(tests/support/fake_confluence.py): pages as HTML with their attachments cited inside the page, unchanged versions not
read, a deleted page gone; who may read a page from its restrictions, its ancestors' (their intersection) and the
space's permissions, a restriction added reaching the next query at the permission sync without embedding; throttling
waited out; a refused token named without showing it."""

from __future__ import annotations

import json

import pytest

from eddi_rag.common.citations import source_label
from eddi_rag.common.principals import Reader
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.search import SearchRequest
from tests.support import files
from tests.support.fake_confluence import EMAIL, TOKEN, FakeConfluence
from tests.support.kbs import make_kb, sources_read

pytestmark = pytest.mark.integration


@pytest.fixture
def world(tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_VAULT_CONFLUENCE_TOKEN", TOKEN)
    with FakeConfluence(page_size=2) as wiki:
        hr = wiki.space("HR", "Human Resources", [("group", "g-staff")])
        leave = wiki.page(hr, "Leave", "<p>Staff take 30 days of annual leave.</p>")
        wiki.attach(leave, "report.pdf", files.pdf(["Sick leave fell by 12 percent in 2026."]), "application/pdf")
        salaries = wiki.page(hr, "Salaries", "<p>Salary bands are reviewed each spring.</p>", restrictions=[("user", "acc-carol")])
        wiki.page(hr, "Salary bands 2027", "<p>The 2027 salary bands rise by three percent.</p>", parent=salaries,
                  restrictions=[("user", "acc-carol"), ("user", "acc-dave")])
        runtime = Runtime(tmp_path / "data")
        kb = make_kb(runtime, chunkStrategy="markdown", minScore=0, audience="DOCUMENT_ACL", sources=[{
            "name": "Wiki", "type": "confluence", "settings": {"tombstoneAfterMissedRuns": 1},
            "confluence": {"baseUrl": wiki.url, "email": EMAIL, "apiToken": "${eddivault:CONFLUENCE_TOKEN}", "spaces": ["HR"]}}])
        yield runtime, kb, wiki
        runtime.close()


read = sources_read


def page_reads(wiki: FakeConfluence) -> list[str]:
    return [r for r in wiki.requests if "body-format=storage" in r or "/wiki/download/" in r]


def test_pages_and_attachments_are_synced_and_cited_inside_their_page(world):
    runtime, kb, wiki = world
    run = runtime.sources.run(kb, "wiki")
    assert (run.status, run.added, run.failed) == ("COMPLETED", 4, 0), run.error
    staff = Reader("u-ann", ("g-staff",))
    (hit, *_) = runtime.search.hits(SearchRequest(kb, "How much did sick leave fall?", reader=staff))
    assert source_label(hit.metadata) == "Leave.html > report.pdf, page 1"
    leave = next(c for c in runtime.stores.get(kb, runtime.rag_config(kb)).get(None) if c.metadata["source"] == "Leave.html")
    assert "30 days of annual leave" in leave.text and leave.metadata["url"].endswith("/wiki/spaces/HR/pages/" +
                                                                                     leave.metadata["document_id"].split("/")[-1] + "/Leave")

    wiki.requests.clear()
    wiki.page(next(iter(wiki.spaces)), "Leave", "<p>Staff take 32 days of annual leave.</p>")
    wiki.delete("Salary bands 2027")
    again = runtime.sources.run(kb, "wiki")
    assert (again.updated, again.unchanged, again.deleted) == (1, 2, 1)
    assert len(page_reads(wiki)) == 1  # only the changed page's body


def test_restrictions_ancestors_and_space_permissions_decide_who_reads(world):
    runtime, kb, wiki = world
    runtime.sources.run(kb, "wiki")
    carol, dave, ann = Reader("acc-carol", ()), Reader("acc-dave", ()), Reader("u-ann", ("g-staff",))
    assert read(runtime, kb, ann, "annual leave") >= {"Leave.html"}  # unrestricted: the space's readers
    assert "Leave.html" not in read(runtime, kb, carol, "annual leave")
    assert "Salary bands 2027.html" in read(runtime, kb, carol, "2027 salary bands")
    assert "Salary bands 2027.html" not in read(runtime, kb, dave, "2027 salary bands")  # its parent names carol alone
    assert "Salaries.html" not in read(runtime, kb, ann, "salary bands reviewed")

    wiki.requests.clear()
    wiki.restrict("Leave", [("group", "g-managers")])
    wiki.groups["g-managers"] = ["acc-max", "acc-lea", "acc-tom"]  # (three: two pages of members)
    synced = runtime.sources.sync_permissions(kb, "wiki")
    assert (synced.status, synced.updated, synced.unchanged, synced.embedded) == ("COMPLETED", 2, 2, 0)  # the page and its attachment
    assert page_reads(wiki) == []
    assert not {"Leave.html", "Leave.html > report.pdf"} & read(runtime, kb, ann, "annual leave sick leave")
    assert "Leave.html" in read(runtime, kb, Reader("u-max", ("g-managers",)), "annual leave")
    assert runtime.groups.of("default", "acc-tom") == ["g-managers"]  # the group's members, from Confluence
    assert "Leave.html" in read(runtime, kb, Reader("acc-tom"), "annual leave")


def test_throttling_is_waited_out_and_a_refused_token_is_named_not_shown(world, monkeypatch):
    runtime, kb, wiki = world
    wiki.throttle["/wiki/api/v2/spaces"] = 1
    run = runtime.sources.run(kb, "wiki")
    assert run.status == "COMPLETED" and "Confluence throttled the sync: 1 s" in run.message, run.error
    monkeypatch.setenv("EDDI_VAULT_CONFLUENCE_TOKEN", "a-wrong-token")
    failed = runtime.sources.run(kb, "wiki")
    assert failed.status == "FAILED" and "HTTP 401" in failed.error
    assert "a-wrong-token" not in json.dumps(runtime.sources.runs(kb, "wiki"))
