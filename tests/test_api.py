
import pytest

from tests.support.waiting import ingestion_ended

BASE = "/ragstore/rags"


def kb_id(response) -> str:
    return response.headers["Location"].split("/")[-1].split("?")[0]


def wait_for(client, url: str, timeout: float = 60) -> dict:
    return ingestion_ended(client, url, timeout)


def test_crud_with_versions_and_locations(client):
    r = client.post(BASE, json={"name": "kb", "embeddingProvider": "local"})
    assert r.status_code == 201
    id = kb_id(r)
    assert r.headers["Location"] == f"eddi://ai.labs.rag/ragstore/rags/{id}?version=1" == r.headers["X-Resource-URI"]
    assert client.get(f"{BASE}/{id}").json() == {"name": "kb", "embeddingProvider": "local"}

    r = client.put(f"{BASE}/{id}?version=1", json={"name": "kb2", "embeddingProvider": "local"})
    assert r.status_code == 200 and r.headers["Location"].endswith("?version=2")
    stale = client.put(f"{BASE}/{id}?version=1", json={"name": "kb3", "embeddingProvider": "local"})
    assert stale.status_code == 409 and stale.json()["currentVersion"] == 2
    assert client.get(f"{BASE}/{id}?version=1").json()["name"] == "kb"

    dup = client.post(f"{BASE}/{id}?version=1")
    assert dup.status_code == 201 and dup.headers["Location"].endswith("?version=1") and kb_id(dup) != id

    descriptors = client.get(f"{BASE}/descriptors?filter=kb2").json()
    assert [d["name"] for d in descriptors] == ["kb2"] and descriptors[0]["resource"].endswith(f"{id}?version=2")

    assert client.delete(f"{BASE}/{id}?version=1").status_code == 409
    assert client.delete(f"{BASE}/{id}").status_code == 200
    assert client.get(f"{BASE}/{id}").status_code == 404
    assert client.delete(f"{BASE}/{id}?permanent=true").status_code == 200
    assert client.get(f"{BASE}/missing").status_code == 404


def test_schema_errors_are_400_with_paths(client):
    r = client.post(BASE, json={"name": "kb", "minScore": 3, "chunkSize": 10, "chunkOverlap": 5, "storeType": "nosuch"})
    assert r.status_code == 400
    assert {(e["path"], str(e["value"])) for e in r.json()["errors"]} == {("$.minScore", "3")}
    r = client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "nosuch"})
    assert r.status_code == 400 and r.json()["errors"][0]["path"] == "$.storeType"
    assert "in-memory" in r.json()["errors"][0]["message"]


@pytest.mark.parametrize("config, path, says", [
    ({"storeParameters": {"colour": "red"}}, "$.storeParameters.colour", "unknown parameter 'colour'"),
    ({"storeType": "pgvector", "storeParameters": {"host": "db"}}, "$.storeParameters", "needs one of: url or password"),
    ({"storeType": "pgvector", "storeParameters": {"url": "postgresql://x", "port": "high"}}, "$.storeParameters.port", "'high' cannot be read as integer"),
    ({"embeddingProvider": "openai"}, "$.embeddingParameters", "'apiKey' is a required property"),
    ({"embeddingParameters": {"batchSize": 0}}, "$.embeddingParameters.batchSize", "0 is less than the minimum of 1"),
])
def test_provider_parameters_are_checked_before_saving(client, config, path, says):
    r = client.post(BASE, json={"name": "kb", "embeddingProvider": "local", **config})
    assert r.status_code == 400
    assert [e["path"] for e in r.json()["errors"]] == [path]
    assert says in r.json()["errors"][0]["message"]


def test_secret_references_pass_parameter_checks(client):
    params = {"url": "${env:PG_URL}", "port": "${eddivault:pg-port}"}
    assert client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "pgvector", "storeParameters": params}).status_code == 201
    assert client.post(BASE, json=[1]).status_code == 422  # not an object: the request schema refuses it
    assert client.get(f"{BASE}/jsonSchema").json()["properties"]["minScore"]["maximum"] == 1


def test_secret_references_are_returned_never_resolved(client, monkeypatch):
    monkeypatch.setenv("MY_KEY", "sk-super-secret")
    r = client.post(BASE, json={"name": "kb", "embeddingProvider": "openai", "embeddingParameters": {"apiKey": "${env:MY_KEY}"}})
    body = client.get(f"{BASE}/{kb_id(r)}").text
    assert "${env:MY_KEY}" in body and "sk-super-secret" not in body


def test_ingest_status_and_query(client):
    id = kb_id(client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0.5}))
    r = client.post(f"{BASE}/{id}/ingest?version=1&documentName=rail.md", content="The night train to Vienna leaves at 22:10.",
                    headers={"Content-Type": "text/plain"})
    assert r.status_code == 202
    body = r.json()
    assert body["kbId"] == id and body["status"] == "pending" and body["ingestionId"]
    status = wait_for(client, f"{BASE}/{id}/ingestion/{body['ingestionId']}/status")
    assert status["status"] == "completed" and status["chunks"] == 1

    r = client.post(f"{BASE}/{id}/query", json={"query": "When does the train to Vienna leave?"})
    (result,) = r.json()["results"]
    assert result["source"] == "rail.md" and result["text"].startswith("The night train")
    assert result["score"] == pytest.approx((result["similarity"] + 1) / 2, abs=1e-5)
    assert client.post(f"{BASE}/{id}/query", json={"query": "x", "where": {"source": {"$bad": 1}}}).status_code == 400
    assert client.post(f"{BASE}/{id}/query", json={"query": ""}).status_code == 422


def test_ingest_errors(client):
    id = kb_id(client.post(BASE, json={"name": "kb", "embeddingProvider": "local"}))
    assert client.post(f"{BASE}/{id}/ingest", content="   ").status_code == 400
    assert client.post(f"{BASE}/{id}/ingest?version=9", content="text").status_code == 404
    assert client.post(f"{BASE}/nope/ingest", content="text").status_code == 404
    unknown = client.get(f"{BASE}/{id}/ingestion/nope/status")  # EDDI's body: a poller reads status "unknown"
    assert unknown.status_code == 404 and {"ingestionId": "nope", "status": "unknown"}.items() <= unknown.json().items()


def test_failed_ingestion_reports_the_message(client):
    params = {"apiKey": "${env:EDDI_RAG_TEST_UNSET_KEY}"}
    id = kb_id(client.post(BASE, json={"name": "kb", "embeddingProvider": "openai", "embeddingParameters": params}))
    job = client.post(f"{BASE}/{id}/ingest?documentName=a.txt", content="hello").json()
    status = wait_for(client, f"{BASE}/{id}/ingestion/{job['ingestionId']}/status")
    assert status["status"].startswith("failed: secret reference ${env:EDDI_RAG_TEST_UNSET_KEY} is not set")


def test_permanent_delete_removes_the_chunks(client):
    id = kb_id(client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "sqlite"}))
    runtime = client.app.state.runtime
    runtime.ingest(id, "a.md", "Some text.")
    assert runtime.stores.context.db.query("SELECT COUNT(*) FROM kb_chunks WHERE kb=?", (id,))[0][0] == 1
    assert client.delete(f"{BASE}/{id}?permanent=true").status_code == 200
    assert runtime.stores.context.db.query("SELECT COUNT(*) FROM kb_chunks WHERE kb=?", (id,))[0][0] == 0


def test_other_resource_kinds_health_and_openapi(client):
    r = client.post("/agentstore/agents", json={"workflows": []})
    assert r.status_code == 201 and r.headers["Location"].startswith("eddi://ai.labs.agent/agentstore/agents/")
    assert client.get("/health").json()["status"] == "ok"
    paths = client.get("/openapi.json").json()["paths"]
    assert "/ragstore/rags/{id}/ingest" in paths and "/ragstore/rags/{id}/query" in paths


def test_providers_are_listed_with_capabilities_and_schemas(client):
    listed = client.get("/providers").json()
    stores = {p["name"]: p for p in listed["stores"]}
    assert {"in-memory", "sqlite", "pgvector"} <= set(stores)
    assert {"search", "metadata_filtering", "collections"} <= set(stores["sqlite"]["capabilities"])
    assert {p["name"] for p in listed["embeddings"]} >= {"local", "openai"}
    schema = client.get("/providers/stores/pgvector/schema").json()
    assert schema["additionalProperties"] is False and "password" in schema["properties"]
    assert client.get("/providers/embeddings/openai/schema").json()["required"] == ["apiKey"]
    assert client.get("/providers/stores/nope/schema").status_code == 404
    assert client.get("/providers/gadgets/x/schema").status_code == 404


@pytest.mark.integration
@pytest.mark.services
def test_kb_health(client, pgvector_params):
    id = kb_id(client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "sqlite"}))
    client.app.state.runtime.ingest(id, "a.md", "Some text.")
    health = client.get(f"{BASE}/{id}/health").json()
    assert health["status"] == "ok" and health["timestamp"] and health["details"]["documents"] == 1
    bad = {"url": pgvector_params["url"] + "/nonexistent"}  # (a folder inside the socket folder the operator allows)
    id = kb_id(client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "pgvector", "storeParameters": bad}))
    health = client.get(f"{BASE}/{id}/health").json()
    assert health["status"] == "error" and "OperationalError" in health["error"]
    assert client.get(f"{BASE}/nope/health").status_code == 404


def test_documents_retrieve_and_purge_over_http(client):
    id = kb_id(client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "sqlite",
                                       "requiredMetadata": ["lang"]}))
    r = client.post(f"{BASE}/{id}/documents", json={"documents": [
        {"document_id": "rail", "text": "The night train to Vienna leaves at 22:10.", "metadata": {"lang": "en"}},
        {"document_id": "old", "text": "The night train to Vienna left at 21:00 last year.", "metadata": {"lang": "en"},
         "expires_at": 1.0},
        {"document_id": "nolang", "text": "Bonjour."},
    ]})
    result = r.json()
    assert r.status_code == 200 and (result["documents_processed"], result["documents_failed"]) == (2, 1)
    assert result["errors"] == [{"document_id": "nolang", "error": "document 'nolang': missing required metadata lang"}]
    r = client.post(f"{BASE}/{id}/retrieve", json={"query": "night train to Vienna", "maxChunks": 3})
    context = r.json()
    assert r.status_code == 200 and context["meets_threshold"] and not context["cached"]
    assert [c["metadata"]["document_id"] for c in context["chunks"]] == ["rail"]  # "old" has expired
    assert client.post(f"{BASE}/{id}/retrieve", json={"query": "night train to Vienna", "maxChunks": 3}).json()["cached"]
    r = client.post(f"{BASE}/{id}/retrieve", json={"query": "x" * 2001})
    assert r.status_code == 400 and "2001 characters" in r.json()["error"]
    assert client.post(f"{BASE}/{id}/purge").json() == {"kbId": id, "removed": 1}
    assert client.post(f"{BASE}/{id}/retrieve", json={"query": "night train to Vienna", "maxChunks": 3}).json()["cached"] is False


def test_ingestions_append_as_in_eddi_and_replace_is_opt_in(client):
    """EDDI's ingest appends: every ingestion without a name is ``unnamed`` and all of them stay
    retrievable; ``replace=true`` (refused without a documentName) replaces a document's chunks."""
    kb = kb_id(client.post(BASE, json={"name": "Appended", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0}))

    def ingest(query: str, text: str) -> dict:
        r = client.post(f"{BASE}/{kb}/ingest{query}", content=text, headers={"Content-Type": "text/plain"})
        assert r.status_code == 202, r.text
        return wait_for(client, f"{BASE}/{kb}/ingestion/{r.json()['ingestionId']}/status")

    first = ingest("", "The night train to Vienna leaves at 22:10.")
    second = ingest("", "The dining car closes at 21:00.")
    assert first["documentName"] == second["documentName"] == "unnamed" and first["documentId"] != second["documentId"]
    docs = client.get(f"{BASE}/{kb}/documents").json()["documents"]
    assert sorted(d["documentId"] for d in docs) == sorted([first["documentId"], second["documentId"]])
    assert {d["source"] for d in docs} == {"unnamed"}
    found = {r["text"] for r in client.post(f"{BASE}/{kb}/query", json={"query": "train and dining car", "maxResults": 5}).json()["results"]}
    assert {"The night train to Vienna leaves at 22:10.", "The dining car closes at 21:00."} <= found
    named = [ingest("?documentName=notice.md", f"Notice {n}.")["documentId"] for n in (1, 2)]
    assert len(set(named)) == 2 and all(d.startswith("notice.md#") for d in named)  # appended too, as in EDDI
    assert ingest("?documentName=guide.md&replace=true", "Old guide.")["documentId"] == "guide.md"
    ingest("?documentName=guide.md&replace=true", "New guide.")
    guide = [d for d in client.get(f"{BASE}/{kb}/documents").json()["documents"] if d["documentId"] == "guide.md"]
    assert [d["chunks"] for d in guide] == [1]
    texts = {r["text"] for r in client.post(f"{BASE}/{kb}/query", json={"query": "guide", "where": {"document_id": "guide.md"}}).json()["results"]}
    assert texts == {"New guide."}
    # every chunk carries the ingestion that wrote it (EDDI's ingestionId, 2026-09-28)
    r = client.post(f"{BASE}/{kb}/ingest?documentName=guide.md&replace=true", content="Newest guide.",
                    headers={"Content-Type": "text/plain"})
    wait_for(client, f"{BASE}/{kb}/ingestion/{r.json()['ingestionId']}/status")
    chunks = client.app.state.runtime.stores.get(kb, client.app.state.runtime.rag_config(kb)).get({"document_id": "guide.md"})
    assert [c.metadata["ingestionId"] for c in chunks] == [r.json()["ingestionId"]]
    refused = client.post(f"{BASE}/{kb}/ingest?replace=true", content="x", headers={"Content-Type": "text/plain"})
    assert refused.status_code == 400 and "documentName" in refused.json()["error"]


def test_serve_declares_every_route_but_health_after_its_start(tmp_path):
    """Issue 60, point 2: the app ``serve`` makes (``lazy``) answers /health before its routers are imported (0.1 s of
    a start); the first request for another path waits for them (or a thread declares them as the server starts), and
    what it then serves is what the app made at once serves: the same routes in the same order, the same document."""
    import json

    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.runtime import Runtime
    from tests.support.waiting import until

    with Runtime(tmp_path) as rt:
        eager, lazy, started = (create_app(rt, worker=False, lazy=lazy) for lazy in (False, True, True))
        client = TestClient(lazy)  # (no lifespan: declared at the first request that needs them)
        assert client.get("/health").json()["status"] == "ok"
        assert len(lazy.routes) < len(eager.routes)  # /health answered, nothing else declared
        assert client.get("/ragstore/rags/descriptors").status_code == 200 and len(lazy.routes) == len(eager.routes)
        assert json.dumps(lazy.openapi()) == json.dumps(eager.openapi())  # (the paths in the same order too)
        assert client.get("/ui", follow_redirects=False).status_code == eager_ui(eager)
        with TestClient(started):  # serve's start: a thread declares them
            until(lambda: len(started.routes) == len(eager.routes), "the routes declared after the start", seconds=30)


def eager_ui(app) -> int:
    from fastapi.testclient import TestClient

    return TestClient(app).get("/ui", follow_redirects=False).status_code
