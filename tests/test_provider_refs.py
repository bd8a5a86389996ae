"""Embedding provider by reference (REQ-EMB-010, REQ-EMB-011): the providers map, the type mapping,
and a knowledge base whose embedding is disabled saying why everywhere, never crashing."""

import pytest

from eddi_rag.backends.registry import parameter_names
from eddi_rag.embeddings.references import PROVIDER_TYPES, resolve
from eddi_rag.workflow.memory import ConversationMemory
from tests.support.kbs import make_kb

BASE = "/ragstore/rags"
PROVIDERS = "/providerstore/providers"
MAP = {
    "gemini-1": {"type": "gemini", "apiKey": "AIza-gemini"},
    "my-openai": {"type": "openai", "apiKey": "sk-openai"},
    "my-ollama": {"type": "ollama", "baseUrl": "http://127.0.0.1:11434"},
    "claude": {"type": "anthropic", "apiKey": "sk-ant"},
}


def resolved(provider_id=None, provider=None, parameters=None):
    return resolve(provider_id, provider, parameters, MAP.get, parameter_names)


# REQ-EMB-010: ProviderID-based resolution -------------------------------------------------

def test_a_gemini_provider_resolves_to_the_google_backend_with_its_key():
    r = resolved("gemini-1")
    assert (r.provider, r.parameters["apiKey"], r.via) == ("google", "AIza-gemini", "gemini-1")


def test_an_openai_provider_resolves_to_openai_with_its_key():
    r = resolved("my-openai")
    assert (r.provider, r.parameters) == ("openai", {"apiKey": "sk-openai"})


def test_an_ollama_provider_resolves_to_the_local_ollama_backend_with_no_key():
    r = resolved("my-ollama")
    assert r.provider == "ollama" and "apiKey" not in r.parameters and r.parameters["baseUrl"] == "http://127.0.0.1:11434"
    keyed = resolve("o", None, None, {"o": {"type": "ollama", "apiKey": "ignored"}}.get, parameter_names)
    assert keyed.provider == "ollama" and "apiKey" not in keyed.parameters


def test_a_provider_type_without_embeddings_resolves_to_nothing():
    r = resolved("claude")
    assert r.disabled and r.provider is None and r.parameters == {}
    assert "type 'anthropic', which has no embeddings" in r.reason


def test_an_unknown_provider_id_resolves_to_nothing():
    r = resolved("nobody")
    assert r.disabled and r.parameters == {} and "'nobody' names no entry of the providers map" in r.reason


# REQ-EMB-011: the two paths, and neither ------------------------------------------------

def test_a_valid_provider_id_wins_over_the_provider_name_and_the_kbs_own_parameters_apply():
    r = resolved("my-openai", "local", {"model": "text-embedding-3-large"})
    assert r.provider == "openai" and r.parameters == {"apiKey": "sk-openai", "model": "text-embedding-3-large"}


def test_provider_local_needs_no_key():
    r = resolved(None, "local")
    assert (r.provider, r.parameters, r.disabled) == ("local", {}, False)


def test_neither_provider_id_nor_provider_disables_embedding():
    r = resolved()
    assert r.disabled and r.reason == "neither embeddingProviderId nor embeddingProvider is set (EDDI would embed with openai; set embeddingProvider)"


def test_the_mapping_table_names_only_registered_backends():
    from eddi_rag.backends import registry

    assert {v for v in PROVIDER_TYPES.values() if v} <= set(registry.names(registry.EMBEDDINGS))
    assert PROVIDER_TYPES["gemini"] == "google" and PROVIDER_TYPES["anthropic"] is None


# through the product ------------------------------------------------------------------------

def kb(client, **config) -> str:
    return make_kb(client, config.pop("name", "kb"), **{"embeddingProvider": None, "minScore": 0, **config})


def test_the_providers_map_is_a_versioned_resource_with_a_schema(client):
    r = client.post(PROVIDERS, json={"type": "openai", "apiKey": "${env:OPENAI_API_KEY}"})
    assert r.status_code == 201 and r.headers["Location"].startswith("eddi://ai.labs.providers/providerstore/providers/")
    bad = client.post(PROVIDERS, json={"apiKey": "sk"})
    assert bad.status_code == 400 and "'type' is a required property" in bad.text
    assert client.post(PROVIDERS, json={"type": 7}).status_code == 400


@pytest.mark.integration
def test_a_kb_embeds_through_the_provider_it_names(client, openai_server, monkeypatch):
    monkeypatch.setenv("EDDI_VAULT_MY_OPENAI_KEY", "sk-from-the-map")
    r = client.post(f"{PROVIDERS}?id=my-openai", json={"type": "openai", "apiKey": "${vault:my-openai-key}",
                                                       "baseUrl": openai_server.base_url})
    provider_id = r.headers["Location"].split("/")[-1].split("?")[0]
    id = kb(client, embeddingProviderId=provider_id, embeddingParameters={"dimensions": 16})
    docs = {"documents": [{"document_id": "a", "text": "The night train to Vienna leaves at 22:10."}]}
    assert client.post(f"{BASE}/{id}/documents", json=docs).json()["embedding_count"] == 1
    found = client.post(f"{BASE}/{id}/query", json={"query": "night train"}).json()
    assert found["results"] and found["results"][0]["text"].startswith("The night train")
    call = openai_server.calls("/embeddings")[0]
    assert call["headers"]["authorization"] == "Bearer sk-from-the-map" and call["json"]["dimensions"] == 16
    health = client.get(f"{BASE}/{id}/health").json()
    assert health["embedding"] == {"status": "ok", "provider": "openai", "providerId": provider_id}
    # the retrieve contract resolves the reference as /query does (issue 20, defect 1: it answered 409)
    retrieved = client.post(f"{BASE}/{id}/retrieve", json={"query": "night train", "minRelevance": 0})
    assert retrieved.status_code == 200 and retrieved.json()["chunks"][0]["text"].startswith("The night train"), retrieved.text
    assert all(c["headers"]["authorization"] == "Bearer sk-from-the-map" for c in openai_server.calls("/embeddings"))


@pytest.mark.parametrize("config,reason", [
    ({"embeddingProviderId": "claude"}, "type 'anthropic', which has no embeddings"),
    ({"embeddingProviderId": "nobody"}, "'nobody' names no entry of the providers map"),
    ({}, "neither embeddingProviderId nor embeddingProvider is set (EDDI would embed with openai; set embeddingProvider)"),
])
def test_a_kb_with_embedding_disabled_says_why_and_nothing_crashes(client, config, reason):
    runtime = client.app.state.runtime
    runtime.resources.create("providers", {"type": "anthropic", "apiKey": "sk-ant"}, id="claude")
    id = kb(client, name="Policies", **config)
    health = client.get(f"{BASE}/{id}/health").json()
    assert health["embedding"]["status"] == "disabled" and reason in health["embedding"]["reason"]
    query = client.post(f"{BASE}/{id}/query", json={"query": "refunds"})
    assert query.status_code == 409 and reason in query.json()["error"]
    retrieve = client.post(f"{BASE}/{id}/retrieve", json={"query": "refunds"})
    assert retrieve.status_code == 409 and reason in retrieve.json()["error"]
    ingest = client.post(f"{BASE}/{id}/ingest", content="Refunds take 7 days.", headers={"Content-Type": "text/plain"})
    assert ingest.status_code == 202
    runtime.jobs.wait_idle()
    status = client.get(f"{BASE}/{id}/ingestion/{ingest.json()['ingestionId']}/status").json()["status"]
    assert status.startswith("failed: ") and reason in status
    doctor = client.get(f"{BASE}/{id}/doctor").json()
    failing = [c for c in doctor if not c["ok"]]
    assert failing[0]["check"] == "embeddings" and reason in failing[0]["detail"]


def test_a_disabled_kb_is_traced_in_a_turn_and_the_others_answer(runtime):
    runtime.resources.create("providers", {"type": "anthropic"}, id="claude")
    from eddi_rag.resource_types import resource_uri
    from tests.test_workflow import make_agent, make_kb, step

    good = make_kb(runtime, "Trains", {"rail.md": "The night train to Vienna leaves at 22:10 from platform 4."})
    off = runtime.resources.create("rags", {"name": "Claude notes", "storeType": "sqlite", "embeddingProviderId": "claude"}).id
    agent = make_agent(runtime, [step(resource_uri("rags", good, 1)), step(resource_uri("rags", off, 1))])
    memory = ConversationMemory(agent, user_input="When does the night train leave?")
    turn = runtime.llm_task.execute(memory, {"id": "t", "enableWorkflowRag": True}, None)
    assert "22:10" in turn.system_message
    trace = {t["kb"]: t for t in memory.get("rag:trace:t")}
    assert "which has no embeddings" in trace["Claude notes"]["error"] and trace["Trains"]["retrievedCount"] == 1
