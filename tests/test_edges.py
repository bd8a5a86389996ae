"""Issue 56, around the edges: what a reader may not read stays out of every listing beside the search (ingestions,
the Manager's feedback page, /metrics), and any string is a question (an error inside a search is a 503 "try again"
only when an engine is out of reach)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.search import SearchRequest
from tests.support.kbs import make_kb
from tests.support.waiting import until

SECRET_DOC, OPEN_DOC = "salaries-2027.md", "handbook.md"


@pytest.fixture
def world(tmp_path):
    """A DOCUMENT_ACL knowledge base of tenant default holding a finance document (its ingestion too) and a public one,
    a vote of alice on the finance one, and keys: an editor, bob (group sales), a viewer with no user, alice (finance),
    and a viewer of another tenant."""
    runtime = Runtime(tmp_path)
    keys = {"editor": runtime.keys.create("default", "editor", user="erin")[1],
            "bob": runtime.keys.create("default", "viewer", user="bob", groups=["sales"])[1],
            "nobody": runtime.keys.create("default", "viewer")[1],
            "alice": runtime.keys.create("default", "viewer", user="alice", groups=["finance"])[1],
            "other": runtime.keys.create("acme", "viewer", user="bob")[1]}
    client = TestClient(create_app(runtime))
    client.__enter__()
    kb = make_kb(runtime, "people", audience="DOCUMENT_ACL", minScore=0)
    editor = {"Authorization": f"Bearer {keys['editor']}"}
    jobs = {}
    for name, text, acl in ((SECRET_DOC, "The salary bands for 2027 rise by three percent.", "group:finance"),
                            (OPEN_DOC, "The staff handbook: the office opens at eight.", "public")):
        r = client.post(f"/ragstore/rags/{kb}/ingest", params={"documentName": name, "replace": "true", "acl": acl},
                        content=text.encode(), headers={**editor, "Content-Type": "text/plain"})
        assert r.status_code == 202, r.text
        jobs[name] = r.json()["ingestionId"]
    for job in jobs.values():
        until(lambda j=job: client.get(f"/ragstore/rags/{kb}/ingestion/{j}/status", headers=editor).json()["status"]
              == "completed", "the ingestions")
    hidden = [c.id for c in runtime.stores.get(kb, runtime.knowledge_bases.get(kb)).get({"document_id": SECRET_DOC})]
    runtime.feedback.record("default", kb, "how do salaries rise?", hidden[0], "down", SECRET_DOC, SECRET_DOC, None, "alice")
    yield runtime, client, kb, jobs, {who: {"Authorization": f"Bearer {key}"} for who, key in keys.items()}
    client.__exit__(None, None, None)
    runtime.close()


def test_ingestions_name_only_the_documents_a_viewer_may_read(world):
    """Finding 1: the ingestion history and one ingestion's status, as the documents list shows them."""
    runtime, client, kb, jobs, as_ = world
    base = f"/ragstore/rags/{kb}"
    listed = client.get(f"{base}/ingestions", headers=as_["bob"])
    assert listed.status_code == 200 and SECRET_DOC not in listed.text and jobs[SECRET_DOC] not in listed.text
    assert [j["documentName"] for j in listed.json()] == [OPEN_DOC]
    hidden = client.get(f"{base}/ingestion/{jobs[SECRET_DOC]}/status", headers=as_["bob"])
    assert hidden.status_code == 404 and hidden.json()["status"] == "unknown" and SECRET_DOC not in hidden.text
    missing = client.get(f"{base}/ingestion/{'0' * 24}/status", headers=as_["bob"])
    assert missing.status_code == 404 and missing.json().keys() == hidden.json().keys()  # the same answer as a missing one
    assert client.get(f"{base}/ingestion/{jobs[OPEN_DOC]}/status", headers=as_["bob"]).json()["documentName"] == OPEN_DOC
    for who in ("nobody",):  # a viewer with no user reads nothing of the knowledge base: 403, as everywhere else
        assert client.get(f"{base}/ingestions", headers=as_[who]).status_code == 403
        assert client.get(f"{base}/ingestion/{jobs[OPEN_DOC]}/status", headers=as_[who]).status_code == 403
    assert client.get(f"{base}/ingestions", headers=as_["other"]).status_code == 404  # another tenant's: no such KB
    assert {j["documentName"] for j in client.get(f"{base}/ingestions", headers=as_["alice"]).json()} == {SECRET_DOC, OPEN_DOC}
    assert {j["documentName"] for j in client.get(f"{base}/ingestions", headers=as_["editor"]).json()} == {SECRET_DOC, OPEN_DOC}


def test_the_managers_feedback_page_shows_a_viewer_the_votes_rest_shows_it(world):
    """Finding 2: the Manager's feedback page listed every vote of the tenant; REST's list answered ``[]``."""
    runtime, client, kb, jobs, as_ = world
    for who in ("bob", "nobody"):
        page = client.get("/ui/feedback?vote=all&reviewed=all", headers=as_[who])
        assert page.status_code == 200
        assert "how do salaries rise?" not in page.text and SECRET_DOC not in page.text and "alice" not in page.text, who
        assert client.get("/ragstore/feedback", headers=as_[who]).json() == []
    assert "how do salaries rise?" in client.get("/ui/feedback?vote=all&reviewed=all", headers=as_["alice"]).text  # hers
    assert "how do salaries rise?" in client.get("/ui/feedback?vote=all&reviewed=all", headers=as_["editor"]).text
    runtime.grants.set("default", kb, [{"principal": "user:carol", "access": "VIEW"}])  # shared with carol alone
    assert client.get("/ragstore/feedback", headers=as_["alice"]).json() == []
    assert "how do salaries rise?" not in client.get("/ui/feedback?vote=all&reviewed=all", headers=as_["alice"]).text


def test_metrics_name_only_the_knowledge_bases_the_caller_may_view(world):
    """Finding 5: ``/metrics`` named every tenant's knowledge bases (id, name, store, chunks) to any viewer."""
    runtime, client, kb, jobs, as_ = world
    ours = make_kb(runtime, "open notes")
    runtime.ingest(ours, "n.md", "Open notes for everyone.")
    acme = runtime.saving.create("rags", {"name": "acme secret plans", "embeddingProvider": "local",
                                          "storeType": "sqlite"}, "acme").id
    runtime.ingest(acme, "p.md", "Plans of acme.")
    mine = client.get("/metrics", headers=as_["bob"]).text
    assert f'kb="{ours}"' in mine and acme not in mine and "acme secret plans" not in mine
    assert kb not in mine  # (read by permissions: its count is its editors')
    theirs_seen = client.get("/metrics", headers=as_["other"]).text
    assert f'kb="{acme}"' in theirs_seen and ours not in theirs_seen and "open notes" not in theirs_seen
    jobs_line = next(line for line in theirs_seen.splitlines() if line.startswith('eddi_rag_ingestion_jobs{state="completed"}'))
    assert jobs_line.endswith(" 0.0")  # tenant default's two ingestions are not acme's to count


def test_metrics_count_the_ingestions_a_viewer_may_see(world):
    """Issue 67, point 6: ``eddi_rag_ingestion_jobs`` counted every ingestion of a DOCUMENT_ACL knowledge base for a
    viewer (2 while his ingestion list showed 1); it counts what the caller's list shows."""
    runtime, client, kb, jobs, as_ = world

    def completed(who: str) -> float:
        text = client.get("/metrics", headers=as_[who]).text
        return float(next(line for line in text.splitlines() if line.startswith('eddi_rag_ingestion_jobs{state="completed"}'))
                     .rsplit(" ", 1)[1])

    listed = {who: len(client.get(f"/ragstore/rags/{kb}/ingestions", headers=as_[who]).json()) for who in ("bob", "alice")}
    assert (completed("bob"), completed("alice")) == (listed["bob"], listed["alice"]) == (1, 2)
    assert completed("editor") >= 2 and completed("nobody") == 0  # (a viewer with no user reads nothing of it)


CHINESE = "作为卡罗莱纳黑豹队的先发球员，谁在九场比赛中拿下了五次擒杀？"


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
def test_any_string_is_a_question(runtime, mode):
    """Finding 10: an ordinary Chinese question made the keyword index raise "Only excluding terms given", answered
    503 "try again". Runs of Chinese past the analyzer's token limit are left out of the keyword query."""
    kb = make_kb(runtime, "multi", searchMode=mode, minScore=0)
    runtime.ingest(kb, "zh.md", "卡罗莱纳黑豹队 的 先发球员 在 九场比赛中 拿下了 五次擒杀。")
    runtime.ingest(kb, "de.md", "Die Gehaltsbänder für 2027 steigen um drei Prozent.")
    for question in (CHINESE, "卡罗莱纳黑豹队", "-", "NOT", '"', "AND OR", "ümlaut – ✓", "a" * 200, "擒" * 300):
        runtime.search.hits(SearchRequest(kb, question))  # no error
    assert "zh.md" in {h.metadata["source"] for h in runtime.search.hits(SearchRequest(kb, "卡罗莱纳黑豹队"))} or mode == "vector"


def test_an_error_inside_a_search_is_ours_not_a_server_down(client, monkeypatch):
    """A search failing on its question while every check passes is a 500 saying so, with the fix (report it);
    a 503 "try again" only when an engine is out of reach."""
    from eddi_rag.retrieval.retriever import Retriever

    kb = make_kb(client, "docs", minScore=0)
    client.runtime.ingest(kb, "a.md", "Alpha beta gamma.")

    def fails(error):
        def search(*args, **kwargs):
            raise error
        return search

    monkeypatch.setattr(Retriever, "search", fails(ValueError("Invalid query: something of the question")))
    r = client.post(f"/ragstore/rags/{kb}/query", json={"query": "alpha"})
    assert r.status_code == 500 and r.json()["check"] == "search" and "report it" in r.json()["fix"], r.text
    assert "try again" not in r.json()["fix"]
    monkeypatch.setattr(Retriever, "search", fails(ConnectionError("connection refused")))
    r = client.post(f"/ragstore/rags/{kb}/query", json={"query": "alpha"})
    assert r.status_code == 503 and "try again" in r.json()["fix"], r.text


def _binaries() -> dict[str, bytes]:
    """Random bytes of the shapes that slipped through as text: behind a UTF-16 byte-order mark, and bytes that hold no
    control character (read as Windows-1252); a fixed seed (CI is deterministic)."""
    import codecs
    import random

    r = random.Random(56)
    no_control = [b for b in range(9, 256) if b not in (11, 127, 0x81, 0x8D, 0x8F, 0x90, 0x9D) and not 14 <= b <= 26
                  and not 28 <= b <= 31]
    return {"utf-16 mark": codecs.BOM_UTF16_LE + r.randbytes(20_000), "utf-32 mark": codecs.BOM_UTF32_LE + r.randbytes(20_000),
            "no control bytes": bytes(r.choice(no_control) for _ in range(20_000)), "one byte repeated": b"\x9f" * 20_000,
            "any bytes": r.randbytes(20_000)}


@pytest.mark.parametrize("shape", list(_binaries()))
def test_random_bytes_are_refused_with_the_reason_and_texts_are_not(client, shape):
    """Finding 9: 20,000 random bytes uploaded as blob.bin ended ``completed`` as a chunk of ``ŸŸŸŸ…``."""
    kb = make_kb(client, "files")
    r = client.post(f"/ragstore/rags/{kb}/ingest", params={"documentName": "blob.bin"}, content=_binaries()[shape],
                    headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 415 and ("binary" in r.json()["error"] or "neither" in r.json()["error"]), r.text
    assert client.runtime.documents.list(kb)["documents"] == []


@pytest.mark.parametrize("text,encoding", [("Grüße aus München: die Straße ist schön.", "cp1252"),
                                           ("Grüße aus München: die Straße ist schön.", "utf-16"),
                                           ("卡罗莱纳黑豹队的先发球员在九场比赛中拿下了五次擒杀。", "utf-16"),
                                           ("Привет, мир: это текст.", "utf-32")])
def test_texts_in_the_encodings_we_read_still_are(runtime, text, encoding):
    kb = make_kb(runtime, "texts")
    assert runtime.ingesting.file(kb, "t.txt", text.encode(encoding), "application/octet-stream") == 1
    assert runtime.documents.chunks(kb, "t.txt")[0]["text"].strip() == text


def test_a_write_that_waits_too_long_for_another_processs_lock_is_a_503_with_retry_after(tmp_path):
    """Finding 7: ``serve --processes 2`` answered 3 of 520 uploads 500 "database is locked" (``BEGIN IMMEDIATE``):
    a write waits for the lock within a bound, then 503 with Retry-After, nothing of it written."""
    import sqlite3

    from eddi_rag import state
    from eddi_rag.ingest.job_records import JobRecords
    from eddi_rag.state.sqlite import Database, StateUnavailableError

    path = tmp_path / "state.db"
    db = Database(path, busy_seconds=0.2)
    state.migrate(db)
    records = JobRecords(db)
    records.submit("kb", 1, "before.md", b"first")
    other = sqlite3.connect(path, isolation_level=None)  # another process's write, under way
    other.execute("BEGIN IMMEDIATE")
    with pytest.raises(StateUnavailableError, match="locked by another process|conflicted") as refused:
        records.submit("kb", 1, "during.md", b"second")
    assert refused.value.status == 503 and refused.value.headers()["Retry-After"]
    other.execute("ROLLBACK")
    assert [j.document for j in records.of_kb("kb")] == ["before.md"]  # nothing of the refused one
    assert records.submit("kb", 1, "after.md", b"third").status == "pending"  # the lock gone: as before


def test_test_questions_are_asked_as_a_named_user_or_as_nobody(world):
    """Finding 6: "Run all" showed a passage of a document nobody may read while Ask on the same page was refused."""
    runtime, client, kb, jobs, as_ = world
    runtime.groups.set("default", "alice", ["finance"])
    base = f"/ragstore/rags/{kb}"
    nobody = client.post(f"{base}/questions", json={"question": "How do the salary bands rise?"}, headers=as_["editor"])
    assert nobody.status_code == 201 and nobody.json()["asUser"] is None and nobody.json()["baseline"] == []
    alice = client.post(f"{base}/questions", json={"question": "How do the salary bands rise?", "asUser": "alice"},
                        headers=as_["editor"])
    assert alice.status_code == 201 and [p["document"] for p in alice.json()["baseline"]][:1] == [SECRET_DOC]
    bob = client.post(f"{base}/questions", json={"question": "How do the salary bands rise?", "asUser": "bob"},
                      headers=as_["editor"])
    assert SECRET_DOC not in bob.text
    run = client.post(f"{base}/question-runs", headers=as_["editor"]).json()
    by_user = {r["asUser"]: r for r in run["results"]}
    assert not any(r["changed"] for r in run["results"])
    assert SECRET_DOC not in str(by_user[None]) and SECRET_DOC not in str(by_user["bob"])
    assert SECRET_DOC in str(by_user["alice"])
    bad = client.post(f"{base}/questions", json={"question": "x", "asUser": " "}, headers=as_["editor"])
    assert bad.status_code == 422 and "asUser" in bad.text


TYPED = {  # a literal typed into each secret field the issue names: (where, the config's part holding it)
    "$.sources[0].imap.password": {"sources": [{"name": "Mail", "imap": {"host": "mail.example.com", "username": "kb",
                                                                          "password": "typed-imap-pass-1"}}]},
    "$.sources[0].confluence.apiToken": {"sources": [{"name": "Wiki", "confluence": {
        "baseUrl": "https://example.atlassian.net/wiki", "email": "kb@example.com", "apiToken": "typed-confluence-2",
        "spaces": ["ENG"]}}]},
    "$.sources[0].sharepoint.clientSecret": {"sources": [{"name": "Sites", "sharepoint": {
        "tenantId": "11111111-2222-3333-4444-555555555555", "clientId": "66666666-7777-8888-9999-000000000000",
        "clientSecret": "typed-sharepoint-3", "sites": ["example.sharepoint.com:/sites/eng"]}}]},
    "$.sources[0].s3.secretAccessKey": {"sources": [{"name": "Bucket", "s3": {"bucket": "docs-bucket", "accessKeyId": "${vault:s3-id}",
                                                                              "secretAccessKey": "typed-s3-secret-4"}}]},
    # (issue 67, point 14: the access key id was kept as typed, though its hint said it went to the vault)
    "$.sources[0].s3.accessKeyId": {"sources": [{"name": "Bucket", "s3": {"bucket": "docs-bucket", "accessKeyId": "AKIA-typed-id-4b",
                                                                          "secretAccessKey": "${vault:s3-secret}"}}]},
    "$.sources[0].azureBlob.sasToken": {"sources": [{"name": "Blobs", "azureBlob": {
        "accountUrl": "https://acct.blob.core.windows.net", "container": "docs", "sasToken": "sv=typed-sas-5"}}]},
    "$.sources[0].azureBlob.accountKey": {"sources": [{"name": "Blobs", "azureBlob": {
        "accountUrl": "https://acct.blob.core.windows.net", "container": "docs", "accountKey": "typed-account-key-6"}}]},
    "$.sources[0].gcs.credentials": {"sources": [{"name": "GCS", "gcs": {"bucket": "docs-bucket", "credentials":
        '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----typed-7"}'}}]},
    "$.sources[0].gdrive.credentials": {"sources": [{"name": "Drive", "gdrive": {"driveId": "0AFxQ", "credentials":
        '{"type": "service_account", "private_key": "-----BEGIN PRIVATE KEY-----typed-8"}'}}]},
    "$.embeddingParameters.apiKey": {"embeddingProvider": "openai", "embeddingParameters": {"apiKey": "sk-typed-key-9",
                                                                                           "model": "text-embedding-3-small"}},
}


def _typed_secret(part: dict) -> str:
    """The literal typed into ``part`` (the one value holding "typed")."""
    values = [v for source in part.get("sources", []) for body in source.values() if isinstance(body, dict)
              for v in body.values()] + list(part.get("embeddingParameters", {}).values())
    return next(v for v in values if isinstance(v, str) and "typed" in v)


@pytest.mark.parametrize("where", list(TYPED))
def test_a_secret_typed_into_a_configuration_goes_to_the_vault_and_never_comes_back(tmp_path, monkeypatch, where):
    """Finding 3: a literal secret was a 201 and came back in plain text to every viewer. It is moved into the tenant's
    vault at save and the configuration keeps its reference; no face shows it; with the vault off it is refused."""
    from tests.support.app import app_client

    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "a-master-key-for-the-edges-test")
    config = {"name": "sealed", "embeddingProvider": "local", "storeType": "sqlite", **TYPED[where]}
    secret = _typed_secret(TYPED[where])
    with app_client(tmp_path / "on") as client:
        made = client.post("/ragstore/rags", json=config)
        assert made.status_code == 201, made.text
        kb = made.headers["Location"].split("/")[-1].split("?")[0]
        for path in (f"/ragstore/rags/{kb}", f"/ui/kbs/{kb}", f"/ui/kbs/{kb}/diff?a=1&b=1", f"/ragstore/rags/{kb}/doctor"):
            shown = client.get(path)
            assert "typed-" not in shown.text and secret not in shown.text, path
        stored = client.runtime.catalog.read("rags", kb)
        keys, field = where.removeprefix("$.").replace("[0]", ".0").split("."), None
        field = stored
        for k in keys:
            field = field[int(k)] if k.isdigit() else field[k]
        assert field == f"${{vault:rag-{kb}-{where.removeprefix('$.').replace('[0]', '.0')}}}"
        assert client.runtime.resolver.resolve(field, "default") == secret  # kept where it resolves
        again = client.put(f"/ragstore/rags/{kb}", params={"version": 1}, json={**config, "minScore": 0.5})
        assert again.status_code == 200, again.text
        assert [m["keyName"] for m in client.runtime.vault.list("default")] == [field[8:-1]]  # the same key, replaced
    monkeypatch.delenv("EDDI_VAULT_MASTER_KEY")
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.runtime import Runtime

    # (off: no master key set, and no data directory to keep one in; issue 67 makes one where there is)
    with Runtime() as runtime, TestClient(create_app(runtime)) as client:
        refused = client.post("/ragstore/rags", json=config)
        assert refused.status_code == 400 and refused.json()["errors"][0]["path"] == where, refused.text
        assert "typed-" not in refused.text and "EDDI_VAULT_MASTER_KEY" in refused.text and "${vault:KEY}" in refused.text
        assert client.get("/ragstore/rags/descriptors").json() == []  # nothing stored


def test_a_misspelt_field_is_refused_naming_the_nearest_and_the_maps_stay_open(client):
    """Finding 12: ``bogusField`` or ``web.maxDepht`` was a 201 and ignored (the crawl kept maxDepth 3); EDDI answers 400."""
    base = {"name": "typos", "embeddingProvider": "local", "storeType": "sqlite"}
    r = client.post("/ragstore/rags", json={**base, "bogusField": 1})
    assert r.status_code == 400 and r.json()["errors"][0]["path"] == "$.bogusField", r.text
    r = client.post("/ragstore/rags", json={**base, "maxresults": 3})
    assert r.status_code == 400 and "did you mean 'maxResults'" in r.text
    web = {"name": "Docs", "web": {"startUrl": "https://docs.example.com/", "maxDepht": 5}}
    r = client.post("/ragstore/rags", json={**base, "sources": [web]})
    assert r.status_code == 400 and r.json()["errors"][0]["path"] == "$.sources[0].web.maxDepht" and "'maxDepth'" in r.text
    r = client.post("/ragstore/rags", json={**base, "sources": [{**web, "web": {"startUrl": "https://docs.example.com/"},
                                                                   "settings": {"tombstoneAfterMissedRun": 2}}]})
    assert r.status_code == 400 and "'tombstoneAfterMissedRuns'" in r.text
    assert client.get("/ragstore/rags/descriptors").json() == []  # nothing stored
    kept = client.post("/ragstore/rags", json={**base, "embeddingParameters": {"logRequests": True}})  # EDDI's leftover
    assert kept.status_code == 201 and kept.json()["warnings"], kept.text  # (the maps stay open: a warning, as EDDI logs)
    legacy = client.runtime.resources.create("rags", {**base, "name": "old", "bogusField": 1}).id  # saved before: still read
    client.runtime.ingest(legacy, "a.md", "Refunds take 14 days.")
    assert client.post(f"/ragstore/rags/{legacy}/query", json={"query": "refunds", "minScore": 0}).status_code == 200


def test_kb_id_naming_another_knowledge_base_than_the_paths_is_refused(client):
    """Finding 12: ``?kbId=`` naming another knowledge base than the path's was ignored; EDDI answers 400."""
    kb, other = make_kb(client, "one"), make_kb(client, "two")
    r = client.post(f"/ragstore/rags/{kb}/ingest", params={"kbId": other, "documentName": "a.md"}, content=b"Refunds.",
                    headers={"Content-Type": "text/plain"})
    assert r.status_code == 400 and "kbId" in r.text
    assert client.get(f"/ragstore/rags/{kb}/ingestions").json() == []  # nothing ingested
    r = client.post(f"/ragstore/rags/{kb}/ingest", params={"kbId": kb, "documentName": "a.md"}, content=b"Refunds.",
                    headers={"Content-Type": "text/plain"})
    assert r.status_code == 202, r.text


@pytest.mark.parametrize("provider,key,honoured", [("openai", "endpoint", "baseUrl"), ("ollama", "url", "baseUrl"),
                                                   ("openai", "apiBase", "baseUrl")])
def test_an_endpoint_the_provider_does_not_take_is_refused_at_save_and_at_build(client, provider, key, honoured):
    """Finding 11: an endpoint-like embedding parameter the provider ignores was saved ("EDDI ignores them too"); EDDI
    refuses it at save and when the model is built since October: the documents would go to the default endpoint."""
    params = {"model": "m", key: "https://embeddings.internal.example/v1", **({"apiKey": "${vault:k}"} if provider == "openai" else {})}
    config = {"name": "endpoint", "embeddingProvider": provider, "embeddingParameters": params, "storeType": "sqlite"}
    r = client.post("/ragstore/rags", json=config)
    assert r.status_code == 400 and r.json()["errors"][0]["path"] == f"$.embeddingParameters.{key}", r.text
    assert "default endpoint" in r.text
    fixed = {**params, honoured: params[key]}
    del fixed[key]
    assert client.post("/ragstore/rags", json={**config, "embeddingParameters": fixed}).status_code == 201
    stored = client.runtime.resources.create("rags", config).id  # saved before EDDI's rule: refused when built
    r = client.post(f"/ragstore/rags/{stored}/query", json={"query": "refunds"})
    assert r.status_code in (400, 409) and key in r.text, r.text


def test_a_second_worker_on_one_sqlite_folder_is_refused(tmp_path):
    """Finding 14: two ``eddi-rag worker``s on one SQLite folder were not refused (a serve is)."""
    from click.testing import CliRunner

    from eddi_rag.cli import main, one_server_per_folder

    held = one_server_per_folder(str(tmp_path), None, "worker")  # the first worker's lock
    try:
        second = CliRunner().invoke(main, ["worker", "--data-dir", str(tmp_path), "--port", "1"])
        assert second.exit_code != 0 and "another eddi-rag worker" in second.output and "--state-url" in second.output
    finally:
        held.close()


@pytest.mark.parametrize("kind", ["web", "sitemap"])
def test_a_run_whose_start_url_the_guard_refuses_fails_saying_so(runtime, kind):
    """Finding 14: a web or sitemap run whose start URL the outbound guard blocked ended COMPLETED with 0 documents."""
    url = "http://10.1.2.3/docs/" if kind == "web" else "http://10.1.2.3/sitemap.xml"  # (the tests' guard allows loopback only)
    block = {"startUrl": url} if kind == "web" else {"url": url}
    kb = make_kb(runtime, "guarded", sources=[{"name": "Site", kind: block}])
    run = runtime.sources.run(kb, "site")
    assert run.status == "FAILED" and "10.1.2.3" in run.error, (run.status, run.error)


def test_a_principal_with_spaces_around_it_is_stored_trimmed(runtime):
    """Finding 14: ``"group:hr "`` was stored as sent, a principal nobody holds."""
    kb = make_kb(runtime, "hr", audience="DOCUMENT_ACL", minScore=0,
                 sources=[{"name": "HR", "web": {"startUrl": "https://hr.example.com/"}, "settings": {"acl": ["group:hr "]}}])
    assert runtime.knowledge_bases.get(kb).sources[0].settings.acl == ["group:hr"]
    runtime.ingest(kb, "leave.md", "Staff take 30 days of annual leave.", acl=["group:hr ", " user:bob"])
    assert runtime.documents.chunks(kb, "leave.md")[0]["acl"] == ["group:hr", "user:bob"]
    assert runtime.documents.set_acl(kb, "leave.md", ["group:hr  "])["acl"] == ["group:hr"]


def test_warn_mode_names_what_enforcing_would_withhold_in_the_turns_trace(client):
    """Finding 14: ``aclMode: warn`` left ``wouldWithhold`` out of the turn's trace (docs/permissions.md promises it).
    (Not reproduced at this commit through the hook or REST, for a named user or nobody: kept as the case it names.)"""
    from eddi_rag.resource_types import resource_uri

    rt = client.runtime
    kb = make_kb(rt, "people", audience="DOCUMENT_ACL", aclMode="warn", minScore=0)
    rt.ingest(kb, "budget.md", "The finance budget for Q3 is 4.2 million euros.", acl=["group:finance"])
    rt.ingest(kb, "handbook.md", "The staff handbook: the finance office is on the second floor.", acl=["public"])
    llm = rt.resources.create("llm", {"tasks": [{"id": "answer", "type": "openai", "enableWorkflowRag": True}]}).uri
    agent = rt.resources.create("agents", {"workflows": [rt.resources.create("workflows", {"workflowSteps": [
        {"type": "eddi://ai.labs.rag", "config": {"uri": resource_uri("rags", kb, 1)}},
        {"type": "eddi://ai.labs.llm", "config": {"uri": llm}}]}).uri]}).id
    budget = rt.stores.get(kb, rt.knowledge_bases.get(kb)).get({"document_id": "budget.md"})[0].id
    for body in ({"message": "What is the finance budget?", "userId": "bob"}, {"message": "What is the finance budget?"}):
        turn = client.post(f"/agentstore/agents/{agent}/turn", json=body)
        (entry,) = turn.json()["memory"]["rag:trace:answer"]
        assert budget in entry["wouldWithhold"], entry


def test_a_title_row_above_a_spreadsheets_header_keeps_the_header_mapping(runtime):
    """Finding 14: a title row above the header (one filled cell) became the header, and every row lost its names."""
    from tests.support import files

    kb = make_kb(runtime, "sheets", minScore=0)
    data = files.xlsx({"Prices": [["Quarterly prices 2027"], [], ["Item", "Price", "Stock"], ["Anvil", 120, 12],
                                  ["Rope", 8, 40]]})
    runtime.ingesting.file(kb, "prices.xlsx", data)
    chunks = runtime.documents.chunks(kb, "prices.xlsx")
    assert "Item: Anvil\nPrice: 120\nStock: 12" in chunks[0]["text"], chunks[0]
    assert "Quarterly prices 2027" in chunks[0]["text"] and chunks[0]["where"] == "Prices!A4:C4", chunks[0]
    plain = files.xlsx({"Prices": [["Item", "Price"], ["Anvil", 120]]})  # a sheet without a title: as before
    runtime.ingesting.file(kb, "plain.xlsx", plain)
    assert runtime.documents.chunks(kb, "plain.xlsx")[0]["where"] == "Prices!A2:B2"


def test_a_code_block_in_a_pdf_keeps_its_lines(runtime):
    """Finding 14: a code block in a PDF lost its lines (joined into one paragraph with the text around it)."""
    from fpdf import FPDF

    doc = FPDF()
    doc.add_page()
    doc.set_font("Helvetica", size=11)
    doc.multi_cell(0, 6, "Install the client, then run this:")
    doc.set_font("Courier", size=10)
    for line in ["pip install eddi-rag", "eddi-rag serve --port 7070", "  --data-dir .eddi-rag"]:
        doc.cell(0, 5, line, new_x="LMARGIN", new_y="NEXT")
    doc.set_font("Helvetica", size=11)
    doc.multi_cell(0, 6, "The server answers at once.")
    kb = make_kb(runtime, "guide")
    runtime.ingesting.file(kb, "guide.pdf", bytes(doc.output()))
    text = "\n".join(c["text"] for c in runtime.documents.chunks(kb, "guide.pdf"))
    assert "```\npip install eddi-rag\neddi-rag serve --port 7070\n  --data-dir .eddi-rag\n```" in text, text
    assert "Install the client, then run this:" in text and "The server answers at once." in text


def test_a_secret_stored_before_sealing_is_shown_redacted_and_saving_back_keeps_it(tmp_path):
    """Finding 3, for configurations saved before secrets were sealed: no face shows the literal they hold
    (``${vault:REDACTED}``, as EDDI's export writes one), and a client that saves back what it read loses nothing."""
    from tests.support.app import app_client

    config = {"name": "legacy", "embeddingProvider": "openai", "storeType": "sqlite",
              "embeddingParameters": {"apiKey": "sk-legacy-typed-0123456789", "model": "text-embedding-3-small"}}
    with app_client(tmp_path) as client:
        kb = client.runtime.resources.create("rags", config).id  # (as an earlier release stored it)
        for path in (f"/ragstore/rags/{kb}", f"/ui/kbs/{kb}", f"/ui/kbs/{kb}/diff?a=1&b=1"):
            assert "sk-legacy-typed" not in client.get(path).text, path
        read = client.get(f"/ragstore/rags/{kb}").json()
        assert read["embeddingParameters"]["apiKey"] == "${vault:REDACTED}"
        saved = client.put(f"/ragstore/rags/{kb}", params={"version": 1}, json={**read, "minScore": 0.5})
        assert saved.status_code == 200, saved.text
        kept = client.runtime.catalog.read("rags", kb)["embeddingParameters"]["apiKey"]
        assert kept.startswith("${vault:") and client.runtime.resolver.resolve(kept, "default") == "sk-legacy-typed-0123456789"


_SYNTAX = ["-", "+", ":", '"', "^", "~", "*", "?", "(", ")", "[", "]", "{", "}", "\\", "/", "AND", "OR", "NOT", "&&", "||",
           " ", "title:", "火车", "Zürich"]
_QUERY = st.one_of(
    st.lists(st.one_of(st.sampled_from(_SYNTAX), st.text(max_size=12),
                       st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)), min_size=1, max_size=10).map("".join),
    st.sampled_from(["x" * 10_000, "\ud800", "a\udfffb", " ", ""]))


@pytest.fixture(scope="module")
def searched(tmp_path_factory):
    """Knowledge bases searched by vector, keyword and hybrid search, with English, German and Chinese text, and REST."""
    from tests.support.app import app_client

    with app_client(tmp_path_factory.mktemp("any-query")) as client:
        kbs = [make_kb(client.runtime, mode, searchMode=mode, minScore=0) for mode in ("hybrid", "keyword", "vector")]
        for kb in kbs:
            client.runtime.ingest(kb, "a.md", "The night train to Vienna leaves at 22:10. Der Zug fährt um zehn. 火车十点出发。")
        yield client, kbs


@settings(max_examples=40, deadline=None)
@given(query=_QUERY)
def test_any_text_a_user_types_is_answered_or_refused_naming_the_query(searched, query):
    """Issue 57, point 6 (and 56's finding 10): random Unicode, lone surrogates and query syntax, through the Python face
    and REST on every search mode: an answer, or a 400 naming the query (empty, too long, a character no text holds),
    never a 500 or a 503. (CI runs a fixed seed; EDDI_RAG_HYPOTHESIS=random runs fresh ones.)"""
    import json

    from eddi_rag.verbs.contract_types import InvalidQueryError

    client, kbs = searched
    for kb in kbs:
        try:
            client.runtime.search.hits(SearchRequest(kb, query))
        except InvalidQueryError as e:
            assert e.status == 400 and "query" in str(e), e
        r = client.post(f"/ragstore/rags/{kb}/query", content=json.dumps({"query": query, "minScore": 0}),
                        headers={"Content-Type": "application/json"})
        assert r.status_code == 200 or (r.status_code in (400, 422) and "query" in r.text), (query, r.status_code, r.text)


def test_each_document_keeps_its_language_detected_offline_or_as_the_knowledge_base_says(client):
    """Issue 57, point 1: a language per knowledge base (auto, a code, or codes to detect among) and per document
    (metadata.language on its chunks, in the documents list); English, German and Chinese beside each other."""
    texts = {"en.md": "The night train to Vienna leaves at ten in the evening from platform four.",
             "de.md": "Der Nachtzug nach Wien fährt um zweiundzwanzig Uhr von Gleis vier ab.",
             "zh.md": "开往维也纳的夜间火车晚上十点从四号站台出发。"}
    auto = make_kb(client, "auto")
    for name, text in texts.items():
        client.runtime.ingest(auto, name, text)
    listed = client.get(f"/ragstore/rags/{auto}/documents").json()["documents"]
    assert {d["documentId"]: d["language"] for d in listed} == {"en.md": "en", "de.md": "de", "zh.md": "zh"}
    assert {c["id"] for c in client.runtime.documents.chunks(auto, "de.md")}  # (chunks carry it:)
    stored = client.runtime.stores.get(auto, client.runtime.knowledge_bases.get(auto)).get({"language": "zh"})
    assert [c.metadata["document_id"] for c in stored] == ["zh.md"]
    german = make_kb(client, "german", language="de")
    client.runtime.ingest(german, "en.md", texts["en.md"])  # said: every document is German
    assert client.get(f"/ragstore/rags/{german}/documents").json()["documents"][0]["language"] == "de"
    among = make_kb(client, "among", language=["de", "fr"])
    client.runtime.ingest(among, "de.md", texts["de.md"])
    client.runtime.ingest(among, "digits.md", "12 34 56")  # nothing to tell by: no language
    langs = {d["documentId"]: d.get("language") for d in client.get(f"/ragstore/rags/{among}/documents").json()["documents"]}
    assert langs == {"de.md": "de", "digits.md": None}
    bad = client.post("/ragstore/rags", json={"name": "bad", "embeddingProvider": "local", "storeType": "sqlite",
                                              "language": "german"})
    assert bad.status_code == 400 and "$.language" in bad.text
