"""Sources kept in sync: folder, web (same-site crawl) and sitemap, against real files and a local
website: add, change, unchanged, delete, failure, retry, a refused concurrent run, a crash mid-run,
the outbound guard, previews, purge, schedules, REST and CLI."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from datetime import datetime, timedelta, timezone

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.common.outbound import OutboundBlockedError, OutboundPolicy
from eddi_rag.runtime import Runtime
from eddi_rag.sources.runs import SourceBusyError
from tests.support import files
from tests.support.kbs import make_kb
from tests.support.site import Site
from tests.support.waiting import until
from tests.test_api import BASE, kb_id
from tests.test_cli_demo import eddi_rag

GUIDE = "# Guide\n\n## Tea\n\nGreen tea is brewed at 80 degrees.\n\n## Coffee\n\nEspresso takes 25 seconds.\n"


@pytest.fixture
def roots(tmp_path, monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    return docs


def folder_kb(runtime, docs, **extra) -> str:
    source = {"name": "Docs", "folder": {"path": str(docs), "include": ["*"], "exclude": ["drafts/*"]}, **extra}
    return make_kb(runtime, chunkStrategy="markdown", minScore=0, sources=[source])


def chunks(runtime, kb, **where):
    return runtime.stores.get(kb, runtime.rag_config(kb)).get(where or None)


@pytest.mark.integration
def test_folder_add_change_unchanged_delete(runtime, roots):
    (roots / "guide.md").write_text(GUIDE)
    (roots / "report.pdf").write_bytes(files.pdf(["Revenue grew by 12 percent."]))
    (roots / "sub").mkdir()
    (roots / "sub" / "notes.txt").write_text("Notes about trains.")
    (roots / "drafts").mkdir()
    (roots / "drafts" / "wip.md").write_text("# Not yet")
    kb = folder_kb(runtime, roots)
    run = runtime.sources.run(kb, "docs")
    assert (run.status, run.added, run.failed) == ("COMPLETED", 3, 0)
    assert {c.metadata["document_id"] for c in chunks(runtime, kb)} == {"docs/guide.md", "docs/report.pdf", "docs/sub/notes.txt"}
    assert {c.metadata["source"] for c in chunks(runtime, kb)} == {"guide.md", "report.pdf", "sub/notes.txt"}
    assert chunks(runtime, kb, document_id="docs/report.pdf")[0].metadata["page"] == 1

    again = runtime.sources.run(kb, "docs")
    assert (again.unchanged, again.added, again.updated, again.embedded) == (3, 0, 0, 0)  # nothing embedded

    (roots / "guide.md").write_text(GUIDE.replace("25 seconds", "30 seconds"))  # one section changes
    (roots / "sub" / "notes.txt").unlink()
    changed = runtime.sources.run(kb, "docs")
    assert (changed.updated, changed.unchanged, changed.deleted, changed.embedded) == (1, 1, 0, 1)
    # missed by one complete run: kept (EDDI's tombstoneAfterMissedRuns, 2 by default)
    assert {d["documentId"]: d["missedRuns"] for d in runtime.sources.documents(kb, "docs")}["docs/sub/notes.txt"] == 1
    assert chunks(runtime, kb, document_id="docs/sub/notes.txt")
    assert runtime.sources.run(kb, "docs").deleted == 1  # missed twice: gone
    assert chunks(runtime, kb, document_id="docs/sub/notes.txt") == []
    assert any("30 seconds" in c.text for c in chunks(runtime, kb, document_id="docs/guide.md"))
    history = runtime.sources.runs(kb, "docs")
    assert [r["deleted"] for r in history] == [1, 0, 0, 0] and history[0]["status"] == "COMPLETED"  # newest first
    assert [r["documentsTombstoned"] for r in history] == [1, 0, 0, 0] and history[-1]["documentsIngested"] == 3


@pytest.mark.integration
def test_failures_keep_their_reason_and_can_be_retried(runtime, roots):
    (roots / "good.md").write_text(GUIDE)
    (roots / "scan.pdf").write_bytes(files.scanned_pdf())
    (roots / "photo.txt").write_bytes(files.GIF)  # named .txt, is a GIF: refused by type
    kb = folder_kb(runtime, roots)
    run = runtime.sources.run(kb, "docs")
    assert (run.added, run.failed) == (1, 2)
    reasons = {f["document"]: f["reason"] for f in run.failures}
    assert "no extractable text" in reasons["docs/scan.pdf"] and "detected image/gif" in reasons["docs/photo.txt"]
    docs = {d["documentId"]: d for d in runtime.sources.documents(kb, "docs")}
    assert docs["docs/scan.pdf"]["status"] == "failed" and "no extractable text" in docs["docs/scan.pdf"]["reason"]

    (roots / "scan.pdf").write_bytes(files.pdf(["Now it has text."]))
    one = runtime.sources.retry(kb, "docs", "docs/scan.pdf")
    assert (one.kind, one.added, one.failed) == ("retry", 1, 0)
    (roots / "photo.txt").write_text("Plain text now.")
    rest = runtime.sources.retry(kb, "docs")
    assert (rest.added, rest.failed) == (1, 0)
    assert all(d["status"] == "ok" for d in runtime.sources.documents(kb, "docs"))


@pytest.mark.integration
def test_a_failing_change_keeps_the_previous_version(runtime, roots):
    (roots / "report.pdf").write_bytes(files.pdf(["Version one."]))
    kb = folder_kb(runtime, roots)
    runtime.sources.run(kb, "docs")
    (roots / "report.pdf").write_bytes(files.encrypted_pdf("Version two."))
    run = runtime.sources.run(kb, "docs")
    assert run.failed == 1 and "encrypted" in run.failures[0]["reason"]
    assert [c.text for c in chunks(runtime, kb)] == ["Version one."]
    (roots / "report.pdf").write_bytes(files.pdf(["Version three."]))
    assert runtime.sources.run(kb, "docs").updated == 1  # it was stored before: an update


def test_one_run_per_source_at_a_time(runtime, roots):
    (roots / "a.md").write_text("A")
    kb = folder_kb(runtime, roots)
    held = runtime.sources.run_records.begin(kb, "docs", "run")  # a run under way in this (live) process
    with pytest.raises(SourceBusyError, match="already running"):
        runtime.sources.run(kb, "docs")
    with TestClient(create_app(runtime)) as client:
        r = client.post(f"{BASE}/{kb}/sources/docs/run")
        assert r.status_code == 409 and held.runId in r.json()["error"]
        assert client.post(f"{BASE}/{kb}/sources/nope/run").status_code == 404


@pytest.mark.integration
def test_a_crash_mid_run_leaves_whole_documents_and_the_next_run_completes(tmp_path, roots):
    for i in range(4):
        (roots / f"d{i}.md").write_text(f"# Doc {i}\n\nText of document number {i}.")
    data = tmp_path / "data"
    rt = Runtime(data)
    kb = folder_kb(rt, roots)
    rt.close()
    script = textwrap.dedent(f"""
        import os
        from eddi_rag.ingest.pipeline import Ingestor
        from eddi_rag.runtime import Runtime
        done = []
        real = Ingestor.ingest_file
        def crashing(self, *args, **kwargs):
            if len(done) == 2:
                os._exit(9)  # the process dies between two documents
            report = real(self, *args, **kwargs)
            done.append(1)
            return report
        Ingestor.ingest_file = crashing
        Runtime({str(data)!r}).sources.run({kb!r}, "docs")
    """)
    proc = subprocess.run([sys.executable, "-c", script], env={**__import__("os").environ}, timeout=300)
    assert proc.returncode == 9
    rt = Runtime(data)
    try:
        (crashed,) = rt.sources.runs(kb, "docs")
        assert crashed["status"] == "FAILED" and "interrupted" in crashed["error"]  # not RUNNING, as the dead process left it
        stored = {c.metadata["document_id"] for c in chunks(rt, kb)}
        assert stored == {"docs/d0.md", "docs/d1.md"}  # whole documents only
        run = rt.sources.run(kb, "docs")
        assert (run.status, run.unchanged, run.added) == ("COMPLETED", 2, 2)
        history = rt.sources.runs(kb, "docs")
        assert history[1]["status"] == "FAILED" and "interrupted" in history[1]["error"]
        assert len(chunks(rt, kb)) == 4
    finally:
        rt.close()


def test_folders_outside_the_allowed_roots_are_refused(runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    kb = folder_kb(runtime, tmp_path)  # saved while the folder was allowed; then the operator narrows the roots
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path / "elsewhere"))
    run = runtime.sources.run(kb, "docs")
    assert run.status == "FAILED" and "outside the allowed roots" in run.error
    with TestClient(create_app(runtime)) as client:
        r = client.post(f"{BASE}/{kb}/sources/docs/run")
        assert r.status_code == 400 and "EDDI_RAG_FOLDER_ROOTS" in r.json()["error"]


@pytest.fixture
def site():
    with Site() as s:
        s.pages["/robots.txt"] = ("text/plain", b"User-agent: *\nDisallow: /private/\n")
        s.html("/", "Home", "<p>Welcome to the rail help centre.</p>", ["/a.html", "/b.html", "/private/x.html",
                                                                       "http://127.0.0.2:1/elsewhere.html"])
        s.html("/a.html", "Tickets", "<p>Tickets are refundable for 30 days.</p>", ["/deep/c.html"])
        s.html("/b.html", "Pets", "<p>Dogs travel free.</p>")
        s.html("/deep/c.html", "Deep", "<p>Too deep to reach at depth 1.</p>")
        s.html("/private/x.html", "Private", "<p>Robots may not read this.</p>")
        yield s


def web_kb(runtime, source: dict) -> str:
    if "web" in source:
        source = {**source, "web": {"requestDelayMs": 0, **source["web"]}}
    return make_kb(runtime, "web", chunkStrategy="recursive", minScore=0, sources=[{"name": "Site", **source}])


@pytest.mark.integration
def test_web_crawl_same_site_with_depth_and_robots(runtime, site):
    kb = web_kb(runtime, {"web": {"startUrl": site.url + "/", "maxDepth": 1}, "settings": {"tombstoneAfterMissedRuns": 1}})
    run = runtime.sources.run(kb, "site")
    assert (run.status, run.added, run.failed) == ("COMPLETED", 3, 0)
    assert {c.metadata["source"] for c in chunks(runtime, kb)} == {site.url + p for p in ("/", "/a.html", "/b.html")}
    assert "/private/x.html" not in site.requests and "/deep/c.html" not in site.requests
    assert chunks(runtime, kb, document_id=site.url + "/a.html")[0].metadata["section"] == "# Tickets"

    site.html("/a.html", "Tickets", "<p>Tickets are refundable for 14 days.</p>")
    site.html("/", "Home", "<p>Welcome to the rail help centre.</p>", ["/a.html"])  # b.html no longer linked
    del site.pages["/b.html"]
    run = runtime.sources.run(kb, "site")
    # the home page's bytes changed (its links), its text did not: re-ingested, nothing re-embedded
    assert (run.updated, run.unchanged, run.deleted, run.embedded) == (2, 0, 1, 1)
    assert chunks(runtime, kb, document_id=site.url + "/b.html") == []
    again = runtime.sources.run(kb, "site")
    assert (again.unchanged, again.embedded) == (2, 0)


@pytest.mark.integration
def test_an_incomplete_crawl_deletes_nothing(runtime, site):
    kb = web_kb(runtime, {"web": {"startUrl": site.url + "/", "maxDepth": 1}})
    runtime.sources.run(kb, "site")
    site.html("/", "Home", "<p>Home</p>", ["/a.html", "/broken.html"])  # b.html unlinked, a link is broken
    site.statuses["/broken.html"] = 503  # a page that could not be read is not a page that is gone
    for _ in range(3):
        run = runtime.sources.run(kb, "site")
        assert run.failed == 1 and run.failures[0]["document"].endswith("/broken.html") and run.deleted == 0
    assert chunks(runtime, kb, document_id=site.url + "/b.html")
    del site.statuses["/broken.html"]  # now a 404: the server says it is gone, and the crawl concludes
    assert [(r.failed, r.deleted) for r in (runtime.sources.run(kb, "site"), runtime.sources.run(kb, "site"))] \
        == [(0, 0), (0, 1)]  # missed by two complete runs (tombstoneAfterMissedRuns: 2)
    assert chunks(runtime, kb, document_id=site.url + "/b.html") == []


@pytest.mark.integration
def test_a_source_that_held_documents_and_lists_none_deletes_nothing_until_it_can_be_read(runtime, site):
    """The start page answers 404 one day: the crawl lists nothing, complete, and would remove every page after two
    runs; the source cannot be read now, so nothing is deleted and the run says why. Once it answers, it concludes."""
    kb = web_kb(runtime, {"web": {"startUrl": site.url + "/", "maxDepth": 1}})
    assert runtime.sources.run(kb, "site").added == 3
    home = site.pages.pop("/")
    for _ in range(3):
        run = runtime.sources.run(kb, "site")
        assert (run.status, run.seen, run.deleted) == ("COMPLETED", 0, 0)
        assert "listed no document where it held 3, and cannot be read now" in run.message and "nothing was deleted" in run.message
    assert {d["documentId"] for d in runtime.documents.list(kb)["documents"]} == {site.url + p for p in ("/", "/a.html", "/b.html")}
    site.pages["/"] = home
    assert runtime.sources.run(kb, "site").unchanged == 3


@pytest.mark.integration
def test_sitemap_and_preview(runtime, site):
    site.pages["/sitemap.xml"] = ("application/xml", f"""<?xml version="1.0" encoding="UTF-8"?>
        <sitemapindex xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
        <sitemap><loc>{site.url}/pages.xml</loc></sitemap></sitemapindex>""".encode())
    site.pages["/pages.xml"] = ("application/xml", f"""<?xml version="1.0" encoding="UTF-8"?>
        <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
        <url><loc>{site.url}/a.html</loc></url><url><loc>{site.url}/deep/c.html</loc></url>
        <url><loc>http://example.invalid/other.html</loc></url></urlset>""".encode())
    kb = web_kb(runtime, {"sitemap": {"url": site.url + "/sitemap.xml", "exclude": ["/private/*"]}})
    plan = runtime.sources.preview(kb, "site")
    assert sorted(plan["add"]) == [site.url + "/a.html", site.url + "/deep/c.html"] and plan["complete"]
    assert chunks(runtime, kb) == []  # a preview embeds and stores nothing
    assert runtime.sources.run(kb, "site").added == 2
    site.html("/deep/c.html", "Deep", "<p>Changed.</p>")
    plan = runtime.sources.preview(kb, "site")
    assert (plan["update"], plan["unchanged"], plan["delete"]) == ([site.url + "/deep/c.html"], [site.url + "/a.html"], [])
    assert runtime.sources.remove_documents(kb, "site") == 2 and chunks(runtime, kb) == []


@pytest.mark.integration
def test_a_sitemap_index_of_gzip_rss_atom_and_plain_text_is_read_within_bounds(runtime, site):
    """The sitemap forms EDDI reads since 2026-09 (issue 42, point 9): an index naming a gzipped urlset, an RSS feed,
    an Atom feed and a plain list; a gzip that unpacks past the protocol's 50 MB is refused, naming the bound."""
    import gzip

    site.pages["/sitemap.xml"] = ("application/xml", ("<sitemapindex xmlns=\"http://www.sitemaps.org/schemas/sitemap/0.9\">" + "".join(
        f"<sitemap><loc>{site.url}{p}</loc></sitemap>" for p in ("/a.xml.gz", "/feed.rss", "/feed.atom", "/list.txt", "/bomb.xml.gz"))
        + "</sitemapindex>").encode())
    site.pages["/a.xml.gz"] = ("application/gzip", gzip.compress(
        f"<urlset xmlns='http://www.sitemaps.org/schemas/sitemap/0.9'><url><loc>{site.url}/a.html</loc></url></urlset>".encode()))
    site.pages["/feed.rss"] = ("application/rss+xml", f"""<rss version="2.0"><channel><title>News</title>
        <item><title>B</title><link>{site.url}/b.html</link></item></channel></rss>""".encode())
    site.pages["/feed.atom"] = ("application/atom+xml", f"""<feed xmlns="http://www.w3.org/2005/Atom"><title>T</title>
        <entry><title>C</title><link rel="alternate" href="{site.url}/deep/c.html"/><link rel="edit" href="{site.url}/edit"/></entry>
        </feed>""".encode())
    site.pages["/list.txt"] = ("text/plain", f"{site.url}/\n# a comment\n{site.url}/a.html\n".encode())
    site.pages["/bomb.xml.gz"] = ("application/gzip", gzip.compress(b"<urlset>" + b" " * (51 * 1024 * 1024) + b"</urlset>", compresslevel=1))
    kb = web_kb(runtime, {"sitemap": {"url": site.url + "/sitemap.xml"}})
    plan = runtime.sources.preview(kb, "site")
    assert sorted(plan["add"]) == sorted(site.url + p for p in ("/", "/a.html", "/b.html", "/deep/c.html"))
    assert not plan["complete"]  # (the bomb could not be read: nothing is concluded from a listing that misses it)
    run = runtime.sources.run(kb, "site")
    assert [f["document"] for f in run.failures] == [site.url + "/bomb.xml.gz"] and "50,000,000" not in run.failures[0]["reason"]
    assert "52,428,800 bytes" in run.failures[0]["reason"] and run.added == 4


@pytest.mark.integration
def test_the_outbound_guard(tmp_path, site):
    strict = Runtime(tmp_path / "strict", outbound=OutboundPolicy())  # the server default: no private networks
    try:
        kb = web_kb(strict, {"web": {"startUrl": site.url + "/"}})
        run = strict.sources.run(kb, "site")
        # a start page the guard refuses fails the run, saying why (issue 56: it ended COMPLETED with 0 documents)
        assert run.status == "FAILED" and "private or loopback" in run.error and not site.requests
    finally:
        strict.close()
    lenient = OutboundPolicy.from_env()  # the tests allow 127.0.0.0/8
    lenient.check(site.url)
    for url in ("http://169.254.169.254/latest/meta-data/", "http://[fe80::1]/", "http://metadata.google.internal/",
                "file:///etc/passwd", "http://10.0.0.1/"):
        with pytest.raises(OutboundBlockedError):
            lenient.check(url)


def test_rest_ids_runs_history_and_schedule(tmp_path, roots):
    (roots / "guide.md").write_text(GUIDE)
    runtime = Runtime(tmp_path / "data")
    with TestClient(create_app(runtime)) as client:
        r = client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "sqlite",
                                    "sources": [{"name": "My Docs", "folder": {"path": str(roots)}, "schedule": "*/5 * * * *"}]})
        assert r.status_code == 201, r.text
        kb = kb_id(r)
        saved = client.get(f"{BASE}/{kb}").json()
        assert saved["sources"][0]["id"] == "my-docs"
        bad = client.post(BASE, json={"name": "kb", "sources": [{"name": "x", "schedule": "never", "folder": {"path": "."}}]})
        assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "$.sources[0].schedule"

        started = client.post(f"{BASE}/{kb}/sources/my-docs/run")
        assert started.status_code == 202 and started.json()["status"] == "started"
        assert started.json()["sourceId"] == "my-docs"
        runs = until(lambda: (r := client.get(f"{BASE}/{kb}/sources/my-docs/runs").json())[0]["status"] != "RUNNING" and r,
                     "the run to end")
        assert runs[0]["status"] == "COMPLETED" and runs[0]["added"] == 1
        assert client.post(f"{BASE}/{kb}/sources/my-docs/preview").json()["unchanged"] == ["my-docs/guide.md"]
        assert client.get(f"{BASE}/{kb}/sources/my-docs/documents").json()[0]["status"] == "ok"

        (roots / "more.md").write_text("# More\n\nAnother page.")
        runtime.scheduler.last = datetime.now(timezone.utc) - timedelta(minutes=6)  # a fire time has passed
        (run_id,) = runtime.scheduler.tick()
        runs = until(lambda: (r := client.get(f"{BASE}/{kb}/sources/my-docs/runs").json())[0]["status"] != "RUNNING" and r,
                     "the scheduled run to end")
        assert runs[0]["runId"] == run_id and runs[0]["added"] == 1 and runs[0]["unchanged"] == 1
        assert runtime.scheduler.tick() == []  # nothing due again so soon
        purged = client.delete(f"{BASE}/{kb}/sources/my-docs/documents")
        assert purged.json() == {"status": "purged", "sourceId": "my-docs"}  # EDDI's purge: the chunks stay
        assert client.get(f"{BASE}/{kb}/sources/my-docs/documents").json() == [] and chunks(runtime, kb)
    runtime.close()


@pytest.mark.integration
def test_cli_sources_run(tmp_path, roots):
    (roots / "guide.md").write_text(GUIDE)
    data = str(tmp_path / "data")
    rt = Runtime(data)
    kb = folder_kb(rt, roots)
    rt.close()
    result = eddi_rag("sources", "run", kb, "--data-dir", data)
    assert result.returncode == 0, result.stderr
    assert "docs: COMPLETED  added 1, updated 0, unchanged 0, deleted 0, failed 0" in result.stdout


def test_a_run_reports_its_counts_while_it_runs(runtime, roots, monkeypatch):
    """Issue 58, finding 2: a run kept no counts until it ended (five polls of a 14-file run: RUNNING, all 0). The second
    document's ingestion is held until the test has seen the first counted by a RUNNING run."""
    import threading

    for name in ("a.md", "b.md", "c.md"):
        (roots / name).write_text(f"# {name}\n\nThe text of {name}.\n")
    kb = folder_kb(runtime, roots)
    release, original, calls = threading.Event(), runtime.ingestor.ingest_file, []

    def held(*args, **kwargs):
        calls.append(args[2])
        if len(calls) == 2:
            release.wait(30)
        return original(*args, **kwargs)

    monkeypatch.setattr(runtime.ingestor, "ingest_file", held)
    started = runtime.sources.start(kb, "docs")
    until(lambda: runtime.sources.runs(kb, "docs")[0]["added"] == 1, "the first document counted while the run runs", 30)
    running = runtime.sources.runs(kb, "docs")[0]
    assert (running["runId"], running["status"], running["documentsSeen"]) == (started.runId, "RUNNING", 1)
    release.set()
    until(lambda: runtime.sources.runs(kb, "docs")[0]["status"] != "RUNNING", "the run to end", 30)
    assert (runtime.sources.runs(kb, "docs")[0]["added"], runtime.sources.runs(kb, "docs")[0]["outcome"]) == (3, "COMPLETED")
