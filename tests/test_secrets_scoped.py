"""The server's secrets stay the operator's (issue 30, finding 2): ``${env:…}`` reads only the names the
operator lists, a key of the server goes only to the endpoint the operator sets, vault keys are the tenant's
own, and every provider, reranker and store endpoint passes the outbound guard. A loopback canary shows that
nothing reaches a listener another tenant chose."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.common.outbound import OutboundBlockedError, OutboundPolicy
from eddi_rag.common.secrets import SecretNotFoundError, SecretResolver, env_secret_errors, vault_variable
from eddi_rag.runtime import Runtime
from tests.support.openai_server import OpenAIStandIn

BASE = "/ragstore/rags"


def test_env_references_read_only_the_names_the_operator_lists(monkeypatch):
    environ = {"HOME": "/root", "OPENAI_API_KEY": "sk-operator", "EDDI_RAG_STATE_URL": "postgresql://u:pw@db/x"}
    resolver = SecretResolver(environ=environ, env_names=None)
    monkeypatch.delenv("EDDI_RAG_SECRET_ENV", raising=False)
    assert resolver.resolve("${env:OPENAI_API_KEY}") == "sk-operator"  # a provider's usual key variable
    for name in ("HOME", "EDDI_RAG_STATE_URL"):
        with pytest.raises(SecretNotFoundError, match="EDDI_RAG_SECRET_ENV"):
            resolver.resolve(f"${{env:{name}}}")
    monkeypatch.setenv("EDDI_RAG_SECRET_ENV", "HOME")  # the operator's list replaces the default one
    assert resolver.resolve("${env:HOME}") == "/root"
    with pytest.raises(SecretNotFoundError):
        resolver.resolve("${env:OPENAI_API_KEY}")
    monkeypatch.setenv("EDDI_RAG_SECRET_ENV", "")
    with pytest.raises(SecretNotFoundError):
        resolver.resolve("${env:HOME}")


def test_vault_keys_resolve_only_in_their_tenant():
    environ = {"EDDI_VAULT_OPENAI_KEY": "sk-default", "EDDI_VAULT_TENANT_A__OPENAI_KEY": "sk-a"}
    resolver = SecretResolver(environ=environ)
    assert resolver.resolve("${vault:openai-key}") == "sk-default"
    assert resolver.resolve("${vault:openai-key}", "A") == "sk-a"
    with pytest.raises(SecretNotFoundError):
        resolver.resolve("${vault:openai-key}", "B")
    # no spelling of a key reaches another tenant's variable
    for key, tenant in (("tenant-a--openai-key", "default"), ("TENANT_A__OPENAI_KEY", "default"), ("a__openai_key", "TENANT")):
        assert vault_variable(key, tenant) is None
        with pytest.raises(SecretNotFoundError):
            resolver.resolve(f"${{vault:{key}}}", tenant)
    assert SecretResolver(vault={"k": "v"}).resolve("${vault:k}") == "v"
    with pytest.raises(SecretNotFoundError):
        SecretResolver(vault={"k": "v"}).resolve("${vault:k}", "B")  # an explicit mapping is the default tenant's


def test_a_key_of_the_environment_goes_only_to_the_operators_endpoint():
    assert env_secret_errors({"apiKey": "${env:OPENAI_API_KEY}"}) == []
    assert env_secret_errors({"apiKey": "${env:OPENAI_API_KEY}", "baseUrl": "${env:OPENAI_BASE_URL}"}) == []
    assert env_secret_errors({"apiKey": "${vault:k}", "baseUrl": "http://anywhere.example/v1"}) == []
    for endpoint in ({"baseUrl": "https://collector.example/v1"}, {"url": "http://h/${env:PGPASS}"}, {"host": "db.example"},
                     {"endpoint": "${vault:where}"}):
        (problem,) = env_secret_errors({"password": "${env:PGPASS}", **endpoint}, "$.storeParameters")
        assert problem["path"] == f"$.storeParameters.{next(iter(endpoint))}"


@pytest.fixture
def two_tenants(tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_VAULT_TENANT_A__OPENAI_KEY", "sk-tenant-a-0123456789")
    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as client, OpenAIStandIn() as canary:
        client.a = {"Authorization": f"Bearer {runtime.keys.create('A', 'admin')[1]}"}
        client.b = {"Authorization": f"Bearer {runtime.keys.create('B', 'admin')[1]}"}
        client.runtime, client.canary = runtime, canary
        yield client
    runtime.close()


def _kb(params: dict) -> dict:
    return {"name": "kb", "embeddingProvider": "openai", "embeddingParameters": {**params, "maxRetries": 0}, "storeType": "sqlite"}


def test_the_canary_hears_nothing_from_another_tenants_references(two_tenants):
    client, canary = two_tenants, two_tenants.canary
    # the server's environment, sent to a listener the tenant chose: refused at save, naming the field
    r = client.post(BASE, headers=client.b, json=_kb({"apiKey": "${env:HOME}", "baseUrl": canary.base_url}))
    assert r.status_code == 400 and "$.embeddingParameters.baseUrl" in r.text
    r = client.post(BASE, headers=client.b, json=_kb({"apiKey": "${env:OPENAI_API_KEY}", "baseUrl": canary.base_url}))
    assert r.status_code == 400 and "$.embeddingParameters.baseUrl" in r.text
    # tenant A's vault key named in B's configuration: saved (B may have that key one day), never resolved
    r = client.post(BASE, headers=client.b, json=_kb({"apiKey": "${vault:openai-key}", "baseUrl": canary.base_url}))
    assert r.status_code == 201, r.text
    kb = r.headers["Location"].split("/")[-1].split("?")[0]
    r = client.post(f"{BASE}/{kb}/documents", headers=client.b, json={"documents": [{"document_id": "a", "text": "hello"}]})
    assert r.json()["documents_failed"] == 1 and "${vault:openai-key} is not set" in str(r.json()["errors"])
    # a configuration stored before the save rule existed: refused when it is used
    stored = client.runtime.resources.create("rags", _kb({"apiKey": "${env:HOME}", "baseUrl": canary.base_url}), tenant="B")
    r = client.post(f"{BASE}/{stored.id}/documents", headers=client.b, json={"documents": [{"document_id": "a", "text": "hello"}]})
    assert r.json()["documents_failed"] == 1 and "baseUrl must be the operator's" in str(r.json()["errors"])
    assert canary.calls("/embeddings") == []
    # in A's own configuration the same reference resolves: the canary hears A's key, and only there
    r = client.post(BASE, headers=client.a, json=_kb({"apiKey": "${vault:openai-key}", "baseUrl": canary.base_url, "dimensions": 8}))
    kb = r.headers["Location"].split("/")[-1].split("?")[0]
    r = client.post(f"{BASE}/{kb}/documents", headers=client.a, json={"documents": [{"document_id": "a", "text": "hello"}]})
    assert r.json()["embedding_count"] == 1
    (call,) = canary.calls("/embeddings")
    assert call["headers"]["authorization"] == "Bearer sk-tenant-a-0123456789"


@pytest.mark.integration
def test_provider_reranker_and_store_endpoints_pass_the_outbound_guard(tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_VAULT_K", "sk-own-0123456789")
    with OpenAIStandIn() as canary, Runtime(tmp_path, outbound=OutboundPolicy()) as runtime:  # the server default
        kb = runtime.saving.create("rags", _kb({"apiKey": "${vault:k}", "baseUrl": canary.base_url}))
        with pytest.raises(OutboundBlockedError, match="127.0.0.1, a private or loopback address"):
            runtime.ingest(kb.id, "a.md", "hello")
        reranked = runtime.saving.create("rags", {"name": "r", "embeddingProvider": "local", "storeType": "sqlite",
                                                  "reranker": "cohere", "minScore": 0,
                                                  "rerankerParameters": {"apiKey": "${vault:k}", "baseUrl": canary.base_url}})
        runtime.ingest(reranked.id, "a.md", "hello world")
        with pytest.raises(OutboundBlockedError, match="rerankerParameters"):
            runtime.query(reranked.id, "hello")
        store = runtime.saving.create("rags", {"name": "s", "embeddingProvider": "local", "storeType": "chroma",
                                               "storeParameters": {"host": "169.254.169.254", "port": 8000}})
        with pytest.raises(OutboundBlockedError, match="link-local or metadata"):
            runtime.ingest(store.id, "a.md", "hello")
        socket = runtime.saving.create("rags", {"name": "p", "embeddingProvider": "local", "storeType": "pgvector",
                                                "storeParameters": {"url": "postgresql://postgres:@/postgres?host=/run/postgresql"}})
        with pytest.raises(OutboundBlockedError, match="local socket folder"):
            runtime.ingest(socket.id, "a.md", "hello")
        assert canary.calls("/embeddings") == [] and canary.requests == []


@pytest.mark.parametrize("url", ["http://2852039166/", "http://[::ffff:169.254.169.254]/", "http://0xa9fea9fe/latest",
                                 "http://169.254.43518/", "http://[::ffff:a9fe:a9fe]/"])
def test_metadata_addresses_in_any_spelling_are_refused_at_save(runtime, url):
    from eddi_rag.config import ConfigValidationError

    with pytest.raises(ConfigValidationError, match=r"\$\.sources\[0\]\.web\.startUrl.*link-local or metadata"):
        runtime.saving.create("rags", {"name": "w", "embeddingProvider": "local", "storeType": "sqlite",
                                       "sources": [{"name": "site", "web": {"startUrl": url}}]})
    with pytest.raises(ConfigValidationError, match=r"\$\.targetServerUrl"):
        runtime.saving.create("httpcalls", {"targetServerUrl": url, "httpCalls": []})
