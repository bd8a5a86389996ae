"""What a careless or hostile caller sends gets a 4xx naming the field, never a 500, and nothing it
sends can make later reads or writes of a knowledge base fail (issue 12's findings 1 and 2)."""

from __future__ import annotations

import json

import pytest

from eddi_rag.config import ConfigValidationError, validate_rag_configuration
from eddi_rag.stores import filters
from tests.support.app import app_client
from tests.support.kbs import make_kb

BASE = "/ragstore/rags"
JSON = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """One server for the module (each test makes its own knowledge base): a hostile request must not
    disturb the next one either."""
    with app_client(tmp_path_factory.mktemp("hostile")) as c:
        yield c


@pytest.fixture
def own_client(tmp_path):
    """A server whose data folder is this test's tmp_path (what a configured path is relative to)."""
    with app_client(tmp_path) as c:
        yield c


@pytest.fixture
def kb(client):
    """A hybrid sqlite KB (vector + FTS5 keyword search) with one ingested document."""
    kb = make_kb(client, "hostile", searchMode="hybrid")
    job = client.post(f"{BASE}/{kb}/documents", json={"documents": [{"document_id": "a", "text": "hello world", "metadata": {"n": 3}}]})
    assert job.status_code == 200 and job.json()["documents_processed"] == 1, job.text
    return kb


def error_of(response) -> str:
    assert 400 <= response.status_code < 500, (response.status_code, response.text)
    return response.json()["error"]


@pytest.mark.parametrize("path", ["{base}/descriptors?index=9223372036854775807", "{base}/{kb}?version=99999999999999999999"])
def test_out_of_range_integers_are_refused_naming_the_parameter(client, kb, path):
    response = client.get(path.format(base=BASE, kb=kb))
    assert response.status_code == 422
    assert error_of(response).startswith(("query.index", "query.version"))


def test_out_of_range_version_on_duplicate_and_ingest(client, kb):
    assert "query.version" in error_of(client.post(f"{BASE}/{kb}?version=99999999999999999999"))
    assert "query.version" in error_of(client.post(f"{BASE}/{kb}/ingest?version=99999999999999999999", content=b"x"))


def test_a_blank_query_is_refused(client, kb):
    assert "body.query" in error_of(client.post(f"{BASE}/{kb}/query", json={"query": " "}))


@pytest.mark.parametrize("body", [b'{"query": "hello", "minScore": NaN}', b'{"query": "hello", "minScore": Infinity}',
                                  b'{"query": "hello", "minScore": 1e400}'])
def test_non_finite_numbers_are_refused_naming_the_field(client, kb, body):
    message = error_of(client.post(f"{BASE}/{kb}/query", content=body, headers=JSON))
    assert message.startswith("body.minScore: ") and "finite" in message
    retrieve = body.replace(b"minScore", b"minRelevance")
    assert error_of(client.post(f"{BASE}/{kb}/retrieve", content=retrieve, headers=JSON)).startswith("body.minRelevance")


def test_a_json_endpoint_refuses_other_content_types(client):
    response = client.post(BASE, content=b'{"name": "x"}', headers={"content-type": "text/plain"})
    assert response.status_code == 415 and "application/json" in response.json()["error"]


def test_a_configuration_with_nan_is_never_stored(client):
    before = client.get(f"{BASE}/descriptors").json()
    response = client.post(BASE, content=b'{"name": "y", "embeddingProvider": "local", "storeType": "sqlite", "minScore": NaN}',
                           headers=JSON)
    assert error_of(response).startswith("body.minScore")
    assert client.get(f"{BASE}/descriptors").json() == before
    with pytest.raises(ConfigValidationError, match=r"\$.minScore: NaN"):  # the CLI's and the library's path too
        validate_rag_configuration({"name": "y", "embeddingProvider": "local", "storeType": "sqlite", "minScore": float("nan")})


def test_a_poisoned_document_cannot_break_the_knowledge_base(client, kb):
    """Finding 2: a NaN ttl_seconds was accepted, then every ingestion into the KB failed."""
    body = b'{"documents": [{"document_id": "p", "text": "poison", "ttl_seconds": NaN}]}'
    assert "ttl_seconds" in error_of(client.post(f"{BASE}/{kb}/documents", content=body, headers=JSON))
    infinite = b'{"documents": [{"document_id": "q", "text": "x", "metadata": {"n": -Infinity}}]}'
    assert "metadata.n: -Infinity" in error_of(client.post(f"{BASE}/{kb}/documents", content=infinite, headers=JSON))
    later = client.post(f"{BASE}/{kb}/documents", json={"documents": [{"document_id": "b", "text": "hello again"}]})
    assert later.status_code == 200 and later.json()["documents_processed"] == 1
    assert client.post(f"{BASE}/{kb}/purge").status_code == 200
    assert client.post(f"{BASE}/{kb}/query", json={"query": "hello"}).status_code == 200


def test_large_and_deep_filters_on_a_hybrid_kb(client, kb):
    """Finding 1: $in with 999 values ("Expression tree is too large"), $and 200 deep, 1e30."""
    def query(where):
        return client.post(f"{BASE}/{kb}/query", json={"query": "hello", "where": where})

    found = query({"n": {"$in": list(range(filters.MAX_VALUES))}})
    assert found.status_code == 200 and [r["id"] for r in found.json()["results"]]
    assert "at most" in error_of(query({"n": {"$in": list(range(filters.MAX_VALUES + 1))}}))
    deep: dict = {"n": 3}
    for _ in range(filters.MAX_DEPTH):
        deep = {"$and": [deep]}
    assert query(deep).status_code == 200, query(deep).text
    assert "nested more than" in error_of(query({"$and": [deep]}))
    very_deep: dict = {"n": 3}
    for _ in range(200):
        very_deep = {"$and": [very_deep]}
    assert "nested more than" in error_of(query(very_deep))
    assert query({"n": 1e30}).status_code == 200
    assert "64-bit" in error_of(query({"n": 2**70}))


def test_validation_errors_never_fail_to_serialise(client, kb):
    """A 422 used to echo the offending input: bytes or NaN made the error itself a 500."""
    response = client.post(f"{BASE}/{kb}/feedback", json={"query": "q", "chunkId": "c", "vote": "meh"})
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "vote"]
    assert "body.vote" in response.json()["error"]


def test_the_embedded_stores_take_filters_at_the_documented_limits(runtime):
    """SQLite compiles $in as one json_each term: any list within MAX_VALUES."""
    from eddi_rag.stores.base import Chunk
    from eddi_rag.stores.embedded.sqlite import SqliteStore

    store = SqliteStore("kb", {}, runtime.stores.context)
    store.upsert([Chunk(f"c{i}", f"text {i}", {"n": i, "s": f"v{i}", "b": i % 2 == 0}, [1.0, float(i)]) for i in range(50)])
    where = {"$or": [{"n": {"$in": list(range(0, 2 * filters.MAX_VALUES, 2))[: filters.MAX_VALUES]}},
                     {"s": {"$in": ["v1", "v3", True]}}]}
    got = {c.id for c in store.get(where=where)}
    assert got == {f"c{i}" for i in range(50) if i % 2 == 0} | {"c1", "c3"}
    assert {c.id for c in store.get(where={"n": {"$nin": list(range(1, 50))}})} == {"c0"}


def test_configured_paths_stay_where_the_operator_allows(own_client, tmp_path, monkeypatch):
    """Finding 4: storeParameters.path created files anywhere; modelPath/tokenizerPath opened any file."""
    outside = tmp_path.parent / f"{tmp_path.name}-elsewhere"
    kb = {"name": "p", "embeddingProvider": "local", "storeType": "sqlite"}
    refused = own_client.post(BASE, json={**kb, "storeParameters": {"path": str(outside / "kb.db")}})
    assert refused.status_code == 400 and refused.json()["errors"][0]["path"] == "$.storeParameters.path"
    escaped = own_client.post(BASE, json={**kb, "storeParameters": {"path": "../../escaped.db"}})
    assert escaped.status_code == 400 and not outside.exists()
    relative = own_client.post(BASE, json={**kb, "storeParameters": {"path": "kbs/own.db"}})
    assert relative.status_code == 201
    kb_id = relative.headers["location"].split("/")[-1].split("?")[0]
    assert own_client.post(f"{BASE}/{kb_id}/documents", json={"documents": [{"document_id": "a", "text": "x"}]}).status_code == 200
    assert (tmp_path / "kbs" / "own.db").is_file()  # under the data directory
    monkeypatch.setenv("EDDI_RAG_PATH_ROOTS", str(outside))
    assert own_client.post(BASE, json={**kb, "storeParameters": {"path": str(outside / "kb.db")}}).status_code == 201

    model = {**kb, "embeddingParameters": {"modelPath": "/etc/passwd", "tokenizerPath": "/etc/hostname"}}
    refused = own_client.post(BASE, json=model)
    assert {e["path"] for e in refused.json()["errors"]} == {"$.embeddingParameters.modelPath", "$.embeddingParameters.tokenizerPath"}
    reranker = own_client.post(BASE, json={**kb, "reranker": "cross-encoder", "rerankerParameters": {"modelPath": "/etc/passwd"}})
    assert "$.rerankerParameters.modelPath" in {e["path"] for e in reranker.json()["errors"]}
    monkeypatch.setenv("EDDI_RAG_MODEL_ROOTS", "/etc")
    assert own_client.post(BASE, json=model).status_code == 201  # the operator allowed the folder


def test_a_job_that_keeps_crashing_the_process_gives_up(tmp_path):
    """Finding 5: queued jobs were retried at every start with no attempt limit."""
    from eddi_rag.ingest.jobs import MAX_ATTEMPTS, IngestionQueue
    from eddi_rag.state.sqlite import Database

    db = Database(tmp_path / "jobs.db")
    crashes: list[str] = []

    def crash(kb, version, document, name, body, fmt, progress):
        crashes.append(document)
        raise SystemExit  # stands in for the process dying: the job is left "processing"

    queue = IngestionQueue(db, crash)
    job = queue.submit("kb", 1, "bomb.pdf", b"x")
    for _ in range(MAX_ATTEMPTS):  # each "restart" picks it up again
        with pytest.raises(SystemExit):
            IngestionQueue(db, crash).process(job.id)
    assert queue.status(job.id).status == "processing" and len(crashes) == MAX_ATTEMPTS
    IngestionQueue(db, crash).process(job.id)
    assert queue.status(job.id).status == f"failed: gave up after {MAX_ATTEMPTS} attempts" and len(crashes) == MAX_ATTEMPTS
    ok = IngestionQueue(db, lambda *a: 1)
    assert ok.retry(job.id).status == "pending"  # the operator may try again: attempts start over
    ok.process(job.id)
    assert ok.status(job.id).status == "completed"


def test_ingestions_can_be_cancelled_and_the_queue_is_capped(client, kb, monkeypatch):
    runtime = client.app.state.runtime
    runtime.jobs.stop()  # no worker: the jobs stay pending
    first = client.post(f"{BASE}/{kb}/ingest?documentName=a.txt", content=b"apples").json()["ingestionId"]
    cancelled = client.delete(f"{BASE}/{kb}/ingestion/{first}")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled"
    assert client.delete(f"{BASE}/{kb}/ingestion/{first}").status_code == 409
    assert client.delete(f"{BASE}/{kb}/ingestion/nope").status_code == 404
    runtime.jobs.process(first)
    assert runtime.jobs.status(first).status == "cancelled"  # a cancelled job never runs
    assert client.post(f"{BASE}/{kb}/ingestion/{first}/retry").json()["status"] == "pending"

    monkeypatch.setattr(runtime.jobs, "max_queued", 1)
    full = client.post(f"{BASE}/{kb}/ingest?documentName=b.txt", content=b"bananas")
    assert full.status_code == 429 and int(full.headers["retry-after"]) > 0 and "waiting" in full.json()["error"]


def test_a_processing_ingestion_stops_at_its_next_step(runtime):
    import threading

    from eddi_rag.ingest.jobs import IngestionQueue

    started, go = threading.Event(), threading.Event()

    def slow(kb, version, document, name, body, fmt, progress):
        progress.embedded(0, 2)
        started.set()
        go.wait(10)
        progress.embedded(1, 2)  # the cancellation takes effect here
        raise AssertionError("not reached")

    queue = IngestionQueue(runtime.db, slow)
    job = queue.submit("kb", 1, "big.pdf", b"x")
    worker = threading.Thread(target=queue.process, args=(job.id,))
    worker.start()
    assert started.wait(10)
    assert queue.cancel(job.id).status == "cancelled"  # stored before cancel returns
    go.set()
    worker.join(10)
    assert queue.status(job.id).status == "cancelled"


def test_per_caller_rate_and_concurrency_limits(tmp_path, monkeypatch):
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.api.limits import Limits
    from eddi_rag.runtime import Runtime

    monkeypatch.setenv("EDDI_RAG_RATE_LIMIT_QUERY", "3/minute")
    monkeypatch.setenv("EDDI_RAG_RATE_LIMIT_INGEST", "none")
    monkeypatch.setenv("EDDI_RAG_MAX_CONCURRENT", "2")
    runtime = Runtime(tmp_path)
    limits = Limits.from_env()
    with TestClient(create_app(runtime, limits=limits)) as client:
        kb = client.post(BASE, json={"name": "r", "embeddingProvider": "local", "storeType": "sqlite"}).headers["location"]
        kb = kb.split("/")[-1].split("?")[0]
        answers = [client.post(f"{BASE}/{kb}/query", json={"query": "hello"}) for _ in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        assert 0 < int(answers[-1].headers["retry-after"]) <= 60 and "3 per 1 minute" in answers[-1].json()["error"]
        for _ in range(5):  # ingestion has no rate limit here
            assert client.post(f"{BASE}/{kb}/ingest?documentName=a.txt", content=b"apples").status_code == 202
        limits.admit("ingest", "address:testclient")
        limits.admit("ingest", "address:testclient")  # two requests of this caller are running
        busy = client.post(f"{BASE}/{kb}/ingest?documentName=a.txt", content=b"apples")
        assert busy.status_code == 429 and busy.headers["retry-after"] == "1" and "at once" in busy.json()["error"]
        limits.release("address:testclient")
        assert client.post(f"{BASE}/{kb}/ingest?documentName=a.txt", content=b"apples").status_code == 202
    runtime.close()


def test_limit_settings_are_checked(monkeypatch):
    from eddi_rag.api.limits import Limits

    monkeypatch.setenv("EDDI_RAG_RATE_LIMIT_QUERY", "lots")
    with pytest.raises(ValueError, match="EDDI_RAG_RATE_LIMIT_QUERY"):
        Limits.from_env()


def test_metrics_for_operators(client, kb, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="eddi_rag.requests"):
        assert client.post(f"{BASE}/{kb}/query", json={"query": "hello"}).status_code == 200
    record = next(r for r in caplog.records if r.name == "eddi_rag.requests" and r.path.endswith("/query"))
    assert (record.method, record.route, record.status) == ("POST", "/ragstore/rags/{id}/query", 200) and record.ms > 0
    text = client.get("/metrics").text
    assert 'eddi_rag_http_request_seconds_count{method="POST",route="/ragstore/rags/{id}/query",status="200"}' in text
    assert f'eddi_rag_kb_chunks{{kb="{kb}",name="hostile",store="sqlite"}} 1.0' in text
    assert 'eddi_rag_ingestion_jobs{state="completed"}' in text
    assert 'eddi_rag_search_seconds_count{kind="vector",store="sqlite"}' in text
    assert "eddi_rag_rag_miss_ratio" in text and "eddi_rag_embedding_cache_lookups_total" in text


def test_serve_logs_each_request_as_a_json_line(client, capsys):
    import json
    import logging

    from eddi_rag.api.observability import log_requests

    requests = logging.getLogger("eddi_rag.requests")
    before = list(requests.handlers)
    log_requests("json")
    try:
        client.get("/ragstore/rags/descriptors")
    finally:
        for handler in set(requests.handlers) - set(before):
            requests.removeHandler(handler)
        requests.propagate = True
    line = json.loads(capsys.readouterr().err.strip().splitlines()[-1])
    assert line["route"] == "/ragstore/rags/descriptors" and line["status"] == 200 and line["name"] == "eddi_rag.requests"


def test_the_openapi_document_says_what_the_api_answers(client):
    """Finding 6: error statuses undocumented, 201s documented as JSON bodies, a 405 naming one route's methods."""
    spec = client.get("/openapi.json").json()
    create = spec["paths"]["/ragstore/rags"]["post"]
    assert {"400", "401", "403", "404", "409", "413", "415", "422", "429", "503"} <= set(create["responses"])
    assert "Location" in create["responses"]["201"]["headers"]  # (a knowledge base's body: {warnings}, issue 33)
    assert list(create["responses"]["201"]["content"]["application/json"]["schema"]["properties"]) == ["warnings"]
    assert spec["paths"]["/llmstore/llms"]["post"]["responses"]["201"]["content"] == {}  # EDDI's: no body
    assert create["requestBody"]["content"]["application/json"]["schema"]["properties"]["minScore"]["maximum"] == 1
    assert spec["components"]["schemas"]["ErrorBody"]["required"] == ["error"]
    options = client.options("/agentstore/agents/some-id")
    assert options.status_code == 405 and options.headers["allow"] == "DELETE, GET, POST, PUT"
    assert client.options("/ragstore/rags/descriptors").headers["allow"] == "GET"
    refused = client.post("/keys", json={"role": "owner"})
    assert refused.status_code == 422 and "body.role" in refused.json()["error"]  # {"error": …} like every error


def test_a_manager_page_for_a_missing_knowledge_base_is_a_404_page(client):
    """The error page passed its status twice and answered 500 (found by mypy)."""
    page = client.get("/ui/kbs/does-not-exist")
    assert page.status_code == 404 and "text/html" in page.headers["content-type"] and "Not found" in page.text


def test_a_json_body_over_the_upload_limit_is_refused_before_it_is_parsed(tmp_path):
    """Finding 5: bodies had no limit on the JSON routes (documents, query...)."""
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.runtime import Runtime

    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime, max_upload_bytes=1000)) as client:
        kb = client.post(BASE, json={"name": "small", "embeddingProvider": "local", "storeType": "sqlite"}).headers["location"]
        kb = kb.split("/")[-1].split("?")[0]
        big = client.post(f"{BASE}/{kb}/documents", json={"documents": [{"document_id": "a", "text": "x" * 2000}]})
        assert big.status_code == 413 and "1000" in big.json()["error"].replace(",", "")
        assert client.get(f"{BASE}/{kb}/documents").json()["documents"] == []  # nothing was written
    runtime.close()


# --- issue 19: one input guard at the edge, sources checked at save, feedback and lists scoped ------

@pytest.mark.parametrize("path,body,field", [
    ("{base}", b'{"name": "\\ud800x", "embeddingProvider": "local", "storeType": "sqlite"}', "body.name"),
    ("{base}/{kb}/retrieve", b'{"query": "\\ud800x"}', "query"),
    ("{base}/{kb}/query", b'{"query": "a\\u0000b"}', "query"),
    ("{base}/{kb}/documents", b'{"documents": [{"document_id": "\\ud800", "text": "x"}]}', "document_id"),
    ("{base}/{kb}/documents", b'{"documents": [{"document_id": "d", "text": "x\\udfff"}]}', "text"),
    ("{base}/{kb}/documents", b'{"documents": [{"document_id": "a\\u0000b", "text": "x"}]}', "document_id"),
    ("{base}", b'{"name": "kb\\u0000", "embeddingProvider": "local", "storeType": "sqlite"}', "body.name"),
    ("{base}", b'{"name": "kb", "embeddingProvider": "local", "storeType": "sqlite", "m\\u0007": 1}', "a key"),
])
def test_lone_surrogates_and_control_characters_are_400_naming_the_field(client, kb, path, body, field):
    """Finding 5 and 7: these were 500 (UnicodeEncodeError) or stored as given."""
    before = client.get(f"{BASE}/descriptors").json()
    r = client.post(path.format(base=BASE, kb=kb), content=body, headers=JSON)
    assert r.status_code == 400 and field in r.json()["error"], r.text
    assert "\\ud800" not in r.text and "\x00" not in r.text and "\x07" not in r.text  # nothing echoed
    assert client.get(f"{BASE}/descriptors").json() == before
    assert client.get(f"{BASE}/{kb}/documents").json()["documents"][0]["documentId"] == "a"


def test_names_in_query_parameters_and_multipart_parts_are_checked(client, kb):
    r = client.post(f"{BASE}/{kb}/ingest?documentName=a%00b.txt", content=b"text")
    assert r.status_code == 400 and "documentName" in r.json()["error"] and "NUL" in r.json()["error"]
    r = client.post(f"{BASE}/{kb}/ingest?documentName=a%1Bb.txt", content=b"text")
    assert r.status_code == 400 and "documentName" in r.json()["error"]
    r = client.post(f"{BASE}/{kb}/ingest", files=[("file", ("ok.txt", b"fine", "text/plain")), ("file", ("b\x1b[2J.txt", b"x", "text/plain"))])
    assert r.status_code == 400 and "file part 2" in r.json()["error"] and "\x1b" not in r.text
    refused = client.get(f"{BASE}/{kb}/ingestions").json()  # neither file was queued; the refusal is in the history
    assert [j["status"][:17] for j in refused] == ["failed: refused: "] and "file part 2" in refused[0]["status"] and "\x1b" not in json.dumps(refused)


def test_a_filter_error_names_the_problem_without_echoing_the_input(client):
    client.post("/collections", json={"name": "c"})
    secret = "<script>alert(1)</script>" * 20
    for where in (f'{{"a": {{"$in": "{secret}"}}}}', f'{{"a": {{"$gt": ["{secret}"]}}}}', f'["{secret}"]'):
        r = client.get("/collections/c/documents", params={"where": where})
        assert r.status_code == 400 and "<script>" not in r.text, r.text


def test_feedback_only_for_a_chunk_the_caller_can_see(client, kb):
    chunk = client.post(f"{BASE}/{kb}/query", json={"query": "hello", "minScore": 0}).json()["results"][0]["id"]
    vote = {"query": "hello?", "vote": "down"}
    assert client.post(f"{BASE}/{kb}/feedback", json={**vote, "chunkId": chunk}).status_code == 201
    r = client.post(f"{BASE}/{kb}/feedback", json={**vote, "chunkId": "no-such-chunk"})
    assert r.status_code == 404 and "no chunk" in r.json()["error"]
    assert len(client.get("/ragstore/feedback").json()) == 1


def test_a_user_bound_key_lists_and_deletes_shared_documents_and_its_own_only(tmp_path):
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.runtime import Runtime

    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as client:
        service = {"Authorization": f"Bearer {runtime.keys.create('t', 'admin', acts_for_users=True)[1]}"}
        alice = {"Authorization": f"Bearer {runtime.keys.create('t', 'editor', user='alice')[1]}"}
        kb = client.post(BASE, json={"name": "k", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0},
                         headers=service).headers["location"].split("/")[-1].split("?")[0]
        client.post(f"{BASE}/{kb}/documents", headers=service, json={"documents": [
            {"document_id": "shared.md", "text": "Shared."}, {"document_id": "alice.md", "text": "Alice's.", "user_id": "alice"},
            {"document_id": "bob.md", "text": "Bob's.", "user_id": "bob"}]})
        listed = lambda who: sorted(d["documentId"] for d in client.get(f"{BASE}/{kb}/documents", headers=who).json()["documents"])  # noqa: E731
        assert listed(alice) == ["alice.md", "shared.md"]
        assert listed(service) == ["alice.md", "bob.md", "shared.md"]
        assert client.delete(f"{BASE}/{kb}/documents/bob.md", headers=alice).status_code == 404
        assert client.post(f"{BASE}/{kb}/feedback", headers=alice, json={
            "query": "q", "vote": "up", "chunkId": runtime.stores.get(kb, runtime.rag_config(kb)).get({"document_id": "bob.md"})[0].id,
        }).status_code == 404
        assert listed(service) == ["alice.md", "bob.md", "shared.md"]
    runtime.close()


@pytest.mark.parametrize("source,field", [
    ({"name": "meta", "web": {"startUrl": "http://169.254.169.254/latest/meta-data/"}}, "$.sources[0].web.startUrl"),
    ({"name": "ll", "web": {"startUrl": "http://[fe80::1]/"}}, "$.sources[0].web.startUrl"),
    ({"name": "gcp", "sitemap": {"url": "http://metadata.google.internal/sitemap.xml"}}, "$.sources[0].sitemap.url"),
    ({"name": "etc", "folder": {"path": "/etc"}}, "$.sources[0].folder.path"),
])
def test_sources_that_may_never_run_are_refused_when_saved(client, source, field):
    r = client.post(BASE, json={"name": "s", "embeddingProvider": "local", "storeType": "sqlite", "sources": [source]})
    assert r.status_code == 400 and [e["path"] for e in r.json()["errors"]] == [field], r.text


def test_a_symlinked_file_out_of_the_folder_roots_is_not_read(runtime, tmp_path, monkeypatch):
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text("The outside secret is 4711.")
    (root / "docs" / "fine.md").write_text("A fine document.")
    (root / "docs" / "link.md").symlink_to(outside / "secret.md")
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(root))
    kb = runtime.resources.create("rags", {"name": "f", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0,
                                           "sources": [{"name": "docs", "folder": {"path": str(root / "docs")}}]}).id
    run = runtime.sources.run(kb, "docs")
    assert run.added == 1 and run.failed == 1 and "outside the folders" in run.failures[0]["reason"]
    assert [d["documentId"] for d in runtime.documents.list(kb)["documents"]] == ["docs/fine.md"]
    assert not [h for h in runtime.query(kb, "outside secret") if "4711" in h.text]  # (not str(): a random id may hold 4711)


def test_stopping_the_worker_puts_a_running_job_back_for_the_next_start(runtime):
    import threading

    from eddi_rag.ingest.jobs import IngestionQueue

    started = threading.Event()

    def slow(kb, version, document, name, body, fmt, progress):
        started.set()
        while not progress.cancelled():
            threading.Event().wait(0.01)
        progress.embedded(0, 1)  # raises: the worker is stopping
        raise AssertionError("not reached")

    queue = IngestionQueue(runtime.db, slow)
    job = queue.submit("kb", 1, "doc.txt", b"x")
    queue.start()
    assert started.wait(10)
    queue.stop()
    assert queue.status(job.id).status == "pending"
    assert runtime.db.query("SELECT attempts FROM ingestion_jobs WHERE id=?", (job.id,))[0]["attempts"] == 0


def test_a_configuration_naming_a_missing_secret_answers_409_naming_it(client):
    """Found while resolving issue 19: /query and /retrieve answered a bare 500 (SecretNotFoundError)."""
    kb = client.post(BASE, json={"name": "s", "embeddingProvider": "openai", "storeType": "sqlite",
                                 "embeddingParameters": {"apiKey": "${env:EDDI_RAG_TEST_NO_SUCH_KEY}"}})
    kb = kb.headers["location"].split("/")[-1].split("?")[0]
    for path in ("query", "retrieve"):
        r = client.post(f"{BASE}/{kb}/{path}", json={"query": "x"})
        assert r.status_code == 409 and "${env:EDDI_RAG_TEST_NO_SUCH_KEY}" in r.json()["error"], (path, r.text)
