"""EDDI's ``sources[]`` as EDDI writes and answers them (labsai/EDDI ``docs/rag.md``, "Ingestion Sources", and
``configs/rag/model/IngestionSource.java``): its fields and limits, ``cron`` and ``enabled``, the crawl's scope
(``pathPrefix``, ``excludePatterns``, ``sitemapUrls``), the ``settings`` budgets, tombstoning after missed runs,
the purge that keeps vectors, upload sources with their file endpoints, and the four verbs' bodies and codes,
through our REST API against real files and a local website."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from eddi_rag.runtime import Runtime
from tests.support import files
from tests.support.site import Site
from tests.support.waiting import until
from tests.test_api import BASE, kb_id

# docs/rag.md, "Ingestion Sources": the example configuration, as EDDI documents it
EDDI_WEB_SOURCE = {
    "name": "public-docs",
    "type": "web",
    "cron": "0 2 * * *",
    "web": {"startUrl": "https://example.com/docs/", "pathPrefix": "/docs/", "maxDepth": 3, "maxPages": 200,
            "excludePatterns": ["*.pdf", "**/changelog/**"], "requestDelayMs": 500, "respectRobots": True},
    "settings": {"tombstoneAfterMissedRuns": 2, "maxSegmentsPerRun": 20000, "timeBudgetMinutes": 10},
}
# docs/rag.md, "Uploaded files (type: upload)"
EDDI_UPLOAD_SOURCE = {"name": "handbooks", "type": "upload",
                      "upload": {"maxFiles": 500, "maxFileBytes": 26214400, "maxTotalBytes": 524288000},
                      "settings": {"maxContentLength": 100000}}


def kb(sources: list[dict], **extra) -> dict:
    return {"name": "kb", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0, "sources": sources, **extra}


def wait_run(client, url: str) -> dict:
    def ended() -> dict | None:
        run = client.get(f"{url}/runs").json()[0]
        return run if run["status"] != "RUNNING" else None
    return until(ended, f"the run of {url}")


def texts(runtime, kb_id_: str, **where) -> list[str]:
    return [c.text for c in runtime.stores.get(kb_id_, runtime.rag_config(kb_id_)).get(where or None)]


def test_eddis_source_json_is_accepted_with_its_limits(client):
    r = client.post(BASE, json=kb([EDDI_WEB_SOURCE, EDDI_UPLOAD_SOURCE]))
    assert r.status_code == 201, r.text
    saved = client.get(f"{BASE}/{kb_id(r)}").json()["sources"]
    assert [s["id"] for s in saved] == ["public-docs", "handbooks"] and saved[0]["cron"] == "0 2 * * *"
    assert saved[0]["web"]["excludePatterns"] == ["*.pdf", "**/changelog/**"]
    ours = client.post(BASE, json=kb([{"name": "d", "folder": {"path": "."}, "schedule": "*/5 * * * *"}]))
    assert client.get(f"{BASE}/{kb_id(ours)}").json()["sources"][0]["cron"] == "*/5 * * * *"  # saved as EDDI spells it
    web = EDDI_WEB_SOURCE["web"]
    for source, path in [
        ({**EDDI_WEB_SOURCE, "cron": "0 0 2 * * *"}, "$.sources[0].cron"),  # Quartz seconds: refused as EDDI does
        ({**EDDI_WEB_SOURCE, "cron": "0 0 30 2 *"}, "$.sources[0].cron"),  # never fires
        ({**EDDI_WEB_SOURCE, "web": {**web, "maxDepth": 21}}, "$.sources[0].web.maxDepth"),
        ({**EDDI_WEB_SOURCE, "web": {**web, "maxPages": 50001}}, "$.sources[0].web.maxPages"),
        ({**EDDI_WEB_SOURCE, "web": {**web, "requestDelayMs": 60001}}, "$.sources[0].web.requestDelayMs"),
        ({**EDDI_WEB_SOURCE, "settings": {"tombstoneAfterMissedRuns": 0}}, "$.sources[0].settings.tombstoneAfterMissedRuns"),
        ({**EDDI_WEB_SOURCE, "settings": {"timeBudgetMinutes": 1441}}, "$.sources[0].settings.timeBudgetMinutes"),
        ({**EDDI_UPLOAD_SOURCE, "upload": {"maxFileBytes": 2000, "maxTotalBytes": 1000}}, "$.sources[0].upload.maxFileBytes"),
        ({"name": "w", "type": "web"}, "$.sources[0].web"),  # a web source needs its web block (named where it is missing)
    ]:
        bad = client.post(BASE, json=kb([source]))
        assert bad.status_code == 400 and path in [e["path"] for e in bad.json()["errors"]], (path, bad.text)
    assert client.post(BASE, json=kb([{**EDDI_WEB_SOURCE, "web": {**web, "maxDepth": 20, "maxPages": 50000}}])).status_code == 201


@pytest.fixture
def site():
    with Site() as s:
        s.html("/docs/", "Docs", "<p>Start here.</p>", ["/docs/a.html", "/docs/guide.pdf", "/docs/changelog/v1.html",
                                                          "/blog/post.html"])
        s.html("/docs/a.html", "Tickets", "<p>Tickets are refundable for 30 days.</p>")
        s.html("/docs/changelog/v1.html", "Changelog", "<p>Version one.</p>")
        s.html("/blog/post.html", "Blog", "<p>Outside the prefix.</p>")
        s.pages["/docs/guide.pdf"] = ("application/pdf", files.pdf(["A guide in PDF."]))
        s.html("/docs/orphan.html", "Orphan", "<p>Only the sitemap lists me.</p>")
        s.pages["/maps/docs.xml"] = ("application/xml", f"""<?xml version="1.0"?>
            <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9"><url><loc>{s.url}/docs/orphan.html</loc></url>
            <url><loc>{s.url}/blog/listed.html</loc></url></urlset>""".encode())
        yield s


@pytest.mark.integration
def test_the_crawl_keeps_to_eddis_scope(client, site):
    source = {"name": "docs", "web": {"startUrl": site.url + "/docs/", "pathPrefix": "/docs/", "requestDelayMs": 0,
                                      "excludePatterns": ["*.pdf", "**/changelog/**"],
                                      "sitemapUrls": [site.url + "/maps/docs.xml"]}}
    r = client.post(BASE, json=kb([source]))
    url = f"{BASE}/{kb_id(r)}/sources/docs"
    assert client.post(f"{url}/run").status_code == 202
    run = wait_run(client, url)
    assert run["status"] == "COMPLETED" and run["documentsIngested"] == 3, run
    assert {d["documentId"] for d in client.get(f"{url}/documents").json()} == {
        site.url + p for p in ("/docs/", "/docs/a.html", "/docs/orphan.html")}
    assert not {"/docs/guide.pdf", "/docs/changelog/v1.html", "/blog/post.html", "/blog/listed.html"} & set(site.requests)


def test_cron_and_enabled(client, tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "a.md").write_text("# A\n\nAlpha.")
    r = client.post(BASE, json=kb([{"name": "on", "folder": {"path": str(tmp_path)}, "cron": "*/5 * * * *"},
                                {"name": "off", "enabled": False, "folder": {"path": str(tmp_path)}, "cron": "*/5 * * * *"}]))
    kb_ = kb_id(r)
    scheduler = client.runtime.scheduler
    scheduler.last = datetime.now(timezone.utc) - timedelta(minutes=6)
    assert scheduler.due(datetime.now(timezone.utc)) == [(kb_, "on")]  # the cron fires; the disabled source does not
    refused = client.post(f"{BASE}/{kb_}/sources/off/run")
    assert refused.status_code == 409 and refused.json()["sourceId"] == "off" and "disabled" in refused.json()["error"]


def test_purge_keeps_the_vectors_and_later_runs_sweep_what_is_gone(client, tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "a.md").write_text("# A\n\nAlpha is kept.")
    (tmp_path / "b.md").write_text("# B\n\nBeta goes away.")
    kb_ = kb_id(client.post(BASE, json=kb([{"name": "docs", "folder": {"path": str(tmp_path)}}])))
    url, runtime = f"{BASE}/{kb_}/sources/docs", client.runtime
    assert runtime.sources.run(kb_, "docs").added == 2

    held = runtime.sources.run_records.begin(kb_, "docs", "run")  # a run holds the source: a purge waits its turn
    busy = client.delete(f"{url}/documents")
    assert busy.status_code == 409 and busy.json()["sourceId"] == "docs"
    runtime.sources.run_records.leases.release(held.runId)  # (that run's process "died")

    assert client.delete(f"{url}/documents").json() == {"status": "purged", "sourceId": "docs"}
    assert client.get(f"{url}/documents").json() == [] and len(texts(runtime, kb_)) == 2  # state forgotten, chunks kept
    (tmp_path / "b.md").unlink()
    first = runtime.sources.run(kb_, "docs")
    assert (first.added, first.deleted) == (1, 0) and any("Beta" in t for t in texts(runtime, kb_))  # no gap
    runtime.sources.run(kb_, "docs")  # the purge marker missed twice: what no run wrote since is swept
    assert [t for t in texts(runtime, kb_) if "Beta" in t] == [] and any("Alpha" in t for t in texts(runtime, kb_))
    assert {r["kind"] for r in client.get(f"{url}/runs").json()} == {"run"}  # purges are not runs


def test_settings_budgets_cost_and_content_length(runtime, tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "a.md").write_text("# A\n\n" + "Alpha sentence. " * 100)
    (tmp_path / "b.md").write_text("# B\n\nBeta.")
    capped = runtime.resources.create("rags", kb([{"name": "docs", "folder": {"path": str(tmp_path)},
                                                   "settings": {"maxSegmentsPerRun": 1, "costPerThousandSegments": 0.5,
                                                                "maxContentLength": 40}}])).id
    run = runtime.sources.run(capped, "docs")
    assert run.stopReason == "maxSegmentsPerRun (1) reached" and (run.added, run.seen) == (1, 2)
    assert run.costUsd == pytest.approx(run.embedded / 1000 * 0.5)
    assert max(len(t) for t in texts(runtime, capped)) <= 40  # cut at maxContentLength
    (tmp_path / "b.md").unlink()
    for _ in range(3):  # a stopped run concludes nothing about what is gone
        assert runtime.sources.run(capped, "docs").deleted == 0


def test_a_monthly_cap_stops_runs_across_the_month_and_the_preview_estimates_both_caps(runtime, tmp_path, monkeypatch):
    """maxSegmentsPerMonth counts what the source's runs embedded since the first of the month (UTC): a run stops at it
    as at maxSegmentsPerRun; a preview counts the chunks a run would embed now (reusing stored vectors costs nothing)
    and says whether they fit, with their cost."""
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    for name in ("a", "b", "c"):
        (tmp_path / f"{name}.md").write_text(f"# {name}\n\nThe {name} document.")
    capped = runtime.resources.create("rags", kb([{"name": "docs", "folder": {"path": str(tmp_path)},
                                                   "settings": {"maxSegmentsPerMonth": 2, "costPerThousandSegments": 2.0}}],
                                                 chunkStrategy="recursive")).id
    estimate = runtime.sources.preview(capped, "docs")["estimate"]
    assert estimate == {"segmentsToEmbed": 3, "maxSegmentsPerRun": 20000, "embeddedThisMonth": 0, "maxSegmentsPerMonth": 2,
                        "withinCaps": False, "costUsd": 0.006}
    first = runtime.sources.run(capped, "docs")
    assert (first.added, first.embedded) == (2, 2) and first.stopReason.startswith("maxSegmentsPerMonth (2) reached: 2 chunks")
    second = runtime.sources.run(capped, "docs")  # the month's budget is spent: the next run stops before embedding
    assert (second.added, second.embedded, second.unchanged) == (0, 0, 0) and second.stopReason.startswith("maxSegmentsPerMonth")
    assert runtime.sources.preview(capped, "docs")["estimate"]["embeddedThisMonth"] == 2
    (tmp_path / "c.md").unlink()
    for _ in range(3):  # a stopped run concludes nothing about what is gone
        assert runtime.sources.run(capped, "docs").deleted == 0


def test_eddis_verbs_bodies(client, tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "a.md").write_text("# A\n\nAlpha.")
    kb_ = kb_id(client.post(BASE, json=kb([{"name": "docs", "folder": {"path": str(tmp_path)}}])))
    url = f"{BASE}/{kb_}/sources/docs"
    started = client.post(f"{url}/run")
    assert started.status_code == 202 and {"status": "started", "sourceId": "docs"}.items() <= started.json().items()
    run = wait_run(client, url)
    for key in ("runId", "sourceId", "status", "startedAt", "finishedAt", "documentsSeen", "documentsIngested",
                "documentsUnchanged", "documentsFailed", "documentsTombstoned", "segmentsStored"):
        assert key in run, key
    assert client.get(f"{url}/runs", params={"limit": 500}).status_code == 200  # above 200 reads as 200
    report = client.post(f"{url}/preview").json()
    assert (report["documentsSeen"], report["documentsUnchanged"], report["sourceId"]) == (1, 1, "docs")
    assert {"documentsIngested", "documentsTombstoned", "tombstoningSkipped", "stopReason"} <= set(report)


def test_upload_sources_keep_their_files(client):
    r = client.post(BASE, json=kb([EDDI_UPLOAD_SOURCE, {"name": "w", "web": {"startUrl": "https://example.com/"}}]))
    kb_, runtime = kb_id(r), client.runtime
    url = f"{BASE}/{kb_}/sources/handbooks"
    sent = client.post(f"{url}/files", files=[("files", ("leave.md", b"# Leave\n\nParental leave is 16 weeks.", "text/markdown")),
                                           ("files", ("broken.pdf", b"%PDF-1.4 not really", "application/pdf"))])
    assert sent.status_code == 200, sent.text
    assert [f["fileName"] for f in sent.json()["stored"]] == ["leave.md"]
    assert sent.json()["rejected"][0]["fileName"] == "broken.pdf" and sent.json()["rejected"][0]["reason"]
    assert client.post(f"{url}/files", files=[("files", ("x.pdf", b"%PDF-1.4 no", "application/pdf"))]).status_code == 400
    assert client.post(f"{BASE}/{kb_}/sources/w/files", files=[("files", ("a.md", b"# A\n\nA.", "text/markdown"))]).status_code == 409

    (listed,) = client.get(f"{url}/files").json()
    assert (listed["fileName"], listed["status"]) == ("leave.md", "Not indexed")
    assert runtime.sources.run(kb_, "handbooks").added == 1
    assert client.get(f"{url}/files").json()[0]["status"] == "Indexed"
    client.post(f"{url}/files", files=[("files", ("leave.md", b"# Leave\n\nParental leave is 20 weeks.", "text/markdown"))])
    (again,) = client.get(f"{url}/files").json()  # the same name replaces the file
    assert (again["fileId"], again["status"]) == (listed["fileId"], "Changed")
    assert runtime.sources.run(kb_, "handbooks").updated == 1 and any("20 weeks" in t for t in texts(runtime, kb_))

    gone = client.delete(f"{url}/files/{listed['fileId']}")
    assert gone.status_code == 200 and client.get(f"{url}/files").json() == [] and texts(runtime, kb_) == []
    assert client.delete(f"{url}/files/{listed['fileId']}").status_code == 404


def test_a_source_dropped_from_the_configuration_takes_what_it_brought(client, tmp_path, monkeypatch):
    """docs/rag.md: "Removing a source takes what the knowledge base learned from it" (dropped from sources[],
    its type changed, or the last version deleted): its chunks, its state, its files."""
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "alpha.md").write_text("# Alpha\n\nAlpha stays.")
    (tmp_path / "b" / "beta.md").write_text("# Beta\n\nBeta goes.")
    sources = [{"name": "a", "folder": {"path": str(tmp_path / "a")}}, {"name": "b", "folder": {"path": str(tmp_path / "b")}},
               {"name": "files", "type": "upload"}]
    r = client.post(BASE, json=kb(sources))
    kb_, runtime = kb_id(r), client.runtime
    client.post(f"{BASE}/{kb_}/sources/files/files", files=[("files", ("gamma.md", b"# Gamma\n\nGamma too.", "text/markdown"))])
    for sid in ("a", "b", "files"):
        assert runtime.sources.run(kb_, sid).added == 1
    assert all(any(word in t for t in texts(runtime, kb_)) for word in ("Alpha", "Beta", "Gamma"))

    kept = [sources[0], {"name": "files", "type": "web", "web": {"startUrl": "https://example.com/"}}]
    assert client.put(f"{BASE}/{kb_}", params={"version": 1}, json=kb(kept)).status_code == 200
    assert [t for t in texts(runtime, kb_) if "Alpha" in t] and not [t for t in texts(runtime, kb_) if "Beta" in t or "Gamma" in t]
    assert runtime.sources.files.list(kb_, "files") == []  # the upload source became a crawl: its files went too
    assert runtime.db.query("SELECT COUNT(*) FROM source_documents WHERE kb_id=? AND source_id='b'", (kb_,))[0][0] == 0

    assert client.delete(f"{BASE}/{kb_}", params={"permanent": "true"}).status_code == 200
    assert runtime.db.query("SELECT COUNT(*) FROM source_documents WHERE kb_id=?", (kb_,))[0][0] == 0


def test_a_run_under_way_at_shutdown_reads_cancelled(tmp_path, monkeypatch):
    """docs/rag.md: "Runs in flight when an instance shuts down gracefully are closed as CANCELLED"."""
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "a.md").write_text("# A\n\nAlpha.")
    data = tmp_path / "data"
    runtime = Runtime(data)
    kb_ = runtime.resources.create("rags", kb([{"name": "docs", "folder": {"path": str(tmp_path)}}])).id
    held = runtime.sources.run_records.begin(kb_, "docs", "run")  # under way in this process
    runtime.close()
    with Runtime(data) as again:
        (run,) = again.sources.runs(kb_, "docs")
        assert (run["runId"], run["status"]) == (held.runId, "CANCELLED")


def test_a_version_the_source_gives_saves_reading_and_what_it_says_of_a_document_reaches_its_chunks(runtime, tmp_path,
                                                                                                   monkeypatch):
    """An upload source's files carry their SHA-256 as version: a run over files that did not change reads none of
    them (a new file, or a new chunking, reads them again). A connector's url and metadata land on the chunks."""
    from dataclasses import replace

    from eddi_rag.config import UploadSource
    from eddi_rag.sources.connectors.folder import FolderConnector

    kb_ = runtime.resources.create("rags", kb([{"name": "docs", "type": "upload"}], chunkStrategy="recursive")).id
    files = runtime.sources.files
    files.store(kb_, "docs", UploadSource(), "a.md", b"# A\n\nAlpha.", "text/markdown")
    reads: list[str] = []
    original = files._read
    monkeypatch.setattr(files, "_read", lambda k, s, fid: (lambda fetch: lambda: reads.append(fid) or fetch())(original(k, s, fid)))
    assert (runtime.sources.run(kb_, "docs").added, len(reads)) == (1, 1)
    again = runtime.sources.run(kb_, "docs")
    assert (again.unchanged, len(reads)) == (1, 1)  # not read
    files.store(kb_, "docs", UploadSource(), "a.md", b"# A\n\nAlpha, changed.", "text/markdown")
    assert (runtime.sources.run(kb_, "docs").updated, len(reads)) == (1, 2)
    runtime.saving.update("rags", kb_, 1, kb([{"name": "docs", "type": "upload"}], chunkStrategy="recursive", chunkSize=300))
    assert (runtime.sources.run(kb_, "docs").updated, len(reads)) == (1, 3)  # another chunking: read and written again

    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "b.md").write_text("# B\n\nBeta.")
    sync = FolderConnector.sync
    monkeypatch.setattr(FolderConnector, "sync", lambda self, ctx, source, cursor, sink: sync(self, ctx, source, cursor, type(
        "Told", (), {"document": lambda _, item: sink.document(replace(item, url="https://wiki.example.com/b", metadata={
            "author": "ann", "sourceId": "not this"})), "unchanged": lambda _, i: sink.unchanged(i),
            "deleted": lambda _, i: sink.deleted(i), "error": lambda _, i, r: sink.error(i, r)})()))
    folder_kb = runtime.resources.create("rags", kb([{"name": "docs", "folder": {"path": str(tmp_path)}}])).id
    runtime.sources.run(folder_kb, "docs")
    (chunk,) = runtime.stores.get(folder_kb, runtime.rag_config(folder_kb)).get(None)
    assert (chunk.metadata["url"], chunk.metadata["author"], chunk.metadata["sourceId"]) == ("https://wiki.example.com/b", "ann", "docs")
