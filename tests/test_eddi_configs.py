"""EDDI's configurations as EDDI writes them: every parameter a string, EDDI's own keys. Each is
accepted through POST /ragstore/rags, stored exactly as sent, and — where the engine runs here —
ingested into and queried through."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest

from eddi_rag.backends import registry
from eddi_rag.verbs.eddi_export import secret_field
from tests.test_api import BASE, kb_id

DOC = "The night train to Vienna leaves at 22:10 from platform 4."


def eddi_pgvector(url: str) -> dict[str, str]:
    """pgserver's socket URI spelled as EDDI writes a pgvector configuration."""
    parts = urlsplit(url)
    return {"host": parse_qs(parts.query)["host"][0], "port": "5432", "database": parts.path.lstrip("/"),
            "user": parts.username or "postgres", "password": "unused-on-the-socket", "dimension": "384",
            "table": "kb_docs"}


STORES = {  # EDDI's keys and strings; each engine named here runs in the tests
    "pgvector": lambda r, tmp: eddi_pgvector(r.getfixturevalue("postgres_url")),
    "chroma": lambda r, tmp: {"baseUrl": "http://{host}:{port}".format(**r.getfixturevalue("chroma_params")),
                              # EDDI's V1 (row 20 of the differences): accepted, and we speak v2 to the same server
                              "tenantName": "default_tenant", "databaseName": "default_database", "apiVersion": "V1",
                              "collectionName": "eddi_docs"},
    "typesense": lambda r, tmp: {k: str(v) for k, v in r.getfixturevalue("typesense_params").items()},
    "elasticsearch": lambda r, tmp: {"serverUrl": r.getfixturevalue("elasticsearch_params")["url"],
                                     "userName": "elastic", "password": "changeme", "indexName": "eddi_docs"},
    "qdrant": lambda r, tmp: {"path": str(tmp / "qdrant"), "useTls": "false", "collectionName": "eddi_docs"},
    "sqlite": lambda r, tmp: {"path": str(tmp / "kb.db")},
    "sqlite-vec": lambda r, tmp: {"path": str(tmp / "kbvec.db")},
    "in-memory": lambda r, tmp: {},
}


SERVED = ("pgvector", "chroma", "typesense")  # engines the tests start on loopback; the others run in this process


@pytest.mark.parametrize("store", [pytest.param(s, marks=[pytest.mark.integration, pytest.mark.services] if s in SERVED else [])
                                   for s in STORES])
def test_an_eddi_store_configuration_is_accepted_kept_and_works(request, tmp_path, store):
    from tests.support.app import app_client

    params = STORES[store](request, tmp_path)  # (its server first: the runtime made after it may reach its socket)
    with app_client(tmp_path) as client:
        _accepted_kept_and_works(client, store, params)


def _accepted_kept_and_works(client, store: str, params: dict) -> None:
    config = {"name": f"eddi {store}", "embeddingProvider": "local", "storeType": store, "storeParameters": params,
              "maxResults": 2, "minScore": 0}
    r = client.post(BASE, json=config)
    assert r.status_code == 201, r.text
    id = kb_id(r)
    kept = client.get(f"{BASE}/{id}").json()["storeParameters"]
    assert {k: v for k, v in kept.items() if not secret_field(k)} == {k: v for k, v in params.items() if not secret_field(k)}
    for k, v in params.items():  # a password or key typed: moved into the vault, its reference kept (issue 56)
        if secret_field(k):
            assert kept[k].startswith("${vault:") and client.runtime.resolver.resolve(kept[k], "default") == v
    ingested = client.post(f"{BASE}/{id}/documents", json={"documents": [{"document_id": "rail.md", "text": DOC}]}).json()
    assert ingested.get("documents_processed") == 1, ingested
    hits = client.post(f"{BASE}/{id}/query", json={"query": "When does the Vienna train leave?"}).json()["results"]
    assert hits and hits[0]["source"] == "rail.md"


@pytest.mark.integration
@pytest.mark.services
def test_pgvector_takes_eddis_table_name(client, postgres_url):
    import psycopg

    params = eddi_pgvector(postgres_url)
    id = kb_id(client.post(BASE, json={"name": "t", "embeddingProvider": "local", "storeType": "pgvector",
                                       "storeParameters": {**params, "table": "eddi_table_alias"}}))
    client.post(f"{BASE}/{id}/documents", json={"documents": [{"document_id": "a", "text": DOC}]})
    with psycopg.connect(postgres_url) as conn:
        assert conn.execute("SELECT count(*) FROM eddi_table_alias").fetchone()[0] == 1


def test_mongodb_atlas_in_eddi_form_is_accepted(client):
    params = {"connectionString": "${env:MONGODB_URI}", "databaseName": "eddi", "collectionName": "kb_docs",
              "indexName": "vector_index"}
    r = client.post(BASE, json={"name": "atlas", "embeddingProvider": "local", "storeType": "mongodb-atlas",
                                "storeParameters": params})
    assert r.status_code == 201, r.text


PROVIDERS = {  # EDDI's embedding parameters, all strings (secret references where EDDI users put keys)
    "openai": {"apiKey": "${env:OPENAI_API_KEY}", "model": "text-embedding-3-small"},
    "azure-openai": {"apiKey": "${eddivault:azureKey}", "endpoint": "https://res.openai.azure.com",
                     "deploymentName": "text-embedding-3-small"},
    "ollama": {"model": "nomic-embed-text", "baseUrl": "http://localhost:11434"},
    "mistral": {"apiKey": "${env:MISTRAL_API_KEY}", "model": "mistral-embed"},
    "cohere": {"apiKey": "${env:COHERE_API_KEY}", "model": "embed-english-v3.0"},
    "bedrock": {"model": "amazon.titan-embed-text-v2:0", "region": "us-east-1"},
    "gemini": {"apiKey": "${env:GEMINI_API_KEY}", "model": "gemini-embedding-2", "taskType": "RETRIEVAL_DOCUMENT",
               "outputDimensionality": "768"},
    "vertex": {"project": "my-project", "location": "us-central1", "model": "text-embedding-005"},
}


@pytest.mark.parametrize("provider", list(PROVIDERS))
def test_an_eddi_embedding_configuration_is_accepted_and_read_as_ours(client, provider):
    params = PROVIDERS[provider]
    r = client.post(BASE, json={"name": provider, "embeddingProvider": provider, "embeddingParameters": params})
    assert r.status_code == 201, r.text
    assert client.get(f"{BASE}/{kb_id(r)}").json()["embeddingParameters"] == params
    prepared = registry.prepare_parameters(registry.EMBEDDINGS, provider, params)
    if provider == "gemini":
        assert prepared["dimensions"] == 768 and "outputDimensionality" not in prepared


@pytest.mark.integration
def test_openai_in_eddi_form_embeds_through_the_wire(client, openai_server, monkeypatch):
    monkeypatch.setenv("EDDI_VAULT_OPENAI_API_KEY", "sk-eddi")
    params = {"apiKey": "${vault:openai-api-key}", "modelName": "text-embedding-3-small", "baseUrl": openai_server.base_url,
              "dimensions": "16"}
    id = kb_id(client.post(BASE, json={"name": "oa", "embeddingProvider": "openai", "embeddingParameters": params,
                                       "storeType": "sqlite", "minScore": 0}))
    assert client.post(f"{BASE}/{id}/documents", json={"documents": [{"document_id": "a", "text": DOC}]}).json()["embedding_count"] == 1
    call = openai_server.calls("/embeddings")[0]
    assert call["json"]["model"] == "text-embedding-3-small" and call["json"]["dimensions"] == 16
    assert call["headers"]["authorization"] == "Bearer sk-eddi"


@pytest.mark.parametrize("store,params,path,expected", [
    ("pgvector", {"password": "x", "port": "fifty"}, "$.storeParameters.port", "integer"),
    ("qdrant", {"useTls": "maybe"}, "$.storeParameters.useTls", "boolean"),
    ("chroma", {"baseUrl": "localhost:8000"}, "$.storeParameters.baseUrl", "does not match"),
    ("pgvector", {"password": "x", "table": "a", "tableName": "b"}, "$.storeParameters.tableName", "same parameter"),
    ("chroma", {"apiVersion": "V3"}, "$.storeParameters.apiVersion", "is not one of"),
])
def test_values_that_cannot_be_read_are_400s_naming_path_and_type(client, store, params, path, expected):
    r = client.post(BASE, json={"name": "bad", "embeddingProvider": "local", "storeType": store, "storeParameters": params})
    assert r.status_code == 400, r.text
    error = next(e for e in r.json()["errors"] if e["path"] == path)
    assert expected in error["message"]


def test_the_schema_documents_both_spellings(client):
    pg = client.get("/providers/stores/pgvector/schema").json()["properties"]
    assert pg["table"]["x-alias-of"] == "tableName" and "EDDI" in pg["table"]["description"]
    chroma = client.get("/providers/stores/chroma/schema").json()["properties"]
    assert {"baseUrl", "tenantName", "databaseName", "apiVersion", "host", "tenant"} <= set(chroma)
    es = client.get("/providers/stores/elasticsearch/schema").json()["properties"]
    assert es["serverUrl"]["x-alias-of"] == "url" and es["userName"]["x-alias-of"] == "username"
    assert client.get("/providers/embeddings/gemini/schema").json()["properties"]["outputDimensionality"]["x-alias-of"] == "dimensions"
