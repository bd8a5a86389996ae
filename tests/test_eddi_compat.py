"""EDDI's clients and data through our REST API and CLI, row by row of ``../shared/EDDI-REFERENCE.md``'s
table of differences (sources: ``tests/test_eddi_sources.py``; ingestion: ``tests/test_api.py``; roles:
``tests/test_auth.py``): the LLM and httpCall paths and URIs (row 3), and the export back to EDDI (row 15),
in EDDI's zip layout (labsai/EDDI ``backup/impl/RestExportService.java``), secrets scrubbed as its
``secrets/sanitize/SecretScrubber.java`` does, import ∘ export the identity."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from eddi_rag import state
from eddi_rag.api.app import create_app
from eddi_rag.backends import registry
from eddi_rag.backends.factories import EmbeddingModelFactory
from eddi_rag.common.quoting import unquoted
from eddi_rag.common.secrets import SecretResolver
from eddi_rag.runtime import Runtime
from eddi_rag.tools.bundle import load_bundle
from eddi_rag.verbs.eddi_export import scrub
from tests.support.openai_server import OpenAIStandIn
from tests.test_api import BASE, kb_id
from tests.test_cli_demo import in_process

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "workflows"
LLM_TASK = {"tasks": [{"id": "t", "type": "openai", "actions": ["*"], "parameters": {"systemMessage": "Hi."}}]}


def test_eddis_llm_and_httpcall_paths_are_canonical_and_ours_still_answer(client):
    llm = client.post("/llmstore/llms", json=LLM_TASK)
    assert llm.status_code == 201 and llm.headers["Location"].startswith("eddi://ai.labs.llm/llmstore/llms/")
    llm_id = llm.headers["Location"].split("/")[-1].split("?")[0]
    assert client.get(f"/llmstore/llms/{llm_id}").json() == LLM_TASK
    assert client.get(f"/llmstore/llmconfigs/{llm_id}").json() == LLM_TASK  # our older path
    calls = client.post("/apicallstore/apicalls", json={"targetServerUrl": "https://client.example.com", "httpCalls": []})
    assert calls.headers["Location"].startswith("eddi://ai.labs.apicalls/apicallstore/apicalls/")
    older = client.post("/httpcallsstore/httpcalls", json={"targetServerUrl": "https://client.example.com", "httpCalls": []})
    assert older.status_code == 201 and older.headers["Location"].startswith("eddi://ai.labs.apicalls/")
    descriptors = client.get("/llmstore/llms/descriptors").json()
    assert descriptors[0]["resource"].startswith("eddi://ai.labs.llm/llmstore/llms/")
    paths = client.get("/openapi.json").json()["paths"]
    assert "/llmstore/llms" in paths and "/apicallstore/apicalls" in paths and "/llmstore/llmconfigs" not in paths
    # a workflow written with our older URIs still resolves
    wf = {"workflowSteps": [{"type": "eddi://ai.labs.llm", "config": {"uri": f"eddi://ai.labs.llm/llmstore/llmconfigs/{llm_id}?version=1"}}]}
    assert client.post("/workflowstore/workflows", json=wf).status_code == 201


def test_the_scrubber_follows_eddis_rules():
    given = {"apiKey": "sk-live-123", "api_key": "x", "maxTokens": "512", "accessToken": "t", "modelName": "gpt-4o-mini",
             "vaulted": "${vault:openai-key}", "env": "${env:OPENAI_API_KEY}", "type": "dynamicvaluematcher",
             "url": "https://user:pass@client.example.com/v1?api_key=abc&q=1", "plain": "https://client.example.com/v1?q=1",
             "headers": {"X-Subscription-Key": "abc", "Accept": "application/json", "Authorization": "Bearer abc"},
             "apiKeys": ["k1", "k2"], "random": "aZ3kP9qR2mX7vB4nL8tY", "words": "a short sentence"}
    out = scrub(given)
    redacted = "${vault:REDACTED}"
    assert [out[k] for k in ("apiKey", "api_key", "accessToken", "random")] == [redacted] * 4
    assert out["apiKeys"] == [redacted, redacted]
    assert [out[k] for k in ("maxTokens", "modelName", "vaulted", "env", "type", "plain", "words")] == \
        [given[k] for k in ("maxTokens", "modelName", "vaulted", "env", "type", "plain", "words")]
    assert out["url"].startswith(f"https://{redacted}@client.example.com/v1?") and "abc" not in out["url"] and "q=1" in out["url"]
    assert out["headers"] == {"X-Subscription-Key": redacted, "Accept": "application/json", "Authorization": redacted}


def test_the_scrubber_keeps_model_table_and_collection_names():
    """Issue 30, finding 6: EDDI's entropy rule redacts text-embedding-3-large; ours keeps what names a model or a place."""
    given = {"model": "text-embedding-3-large", "modelName": "text-embedding-3-large", "deploymentName": "emb-large-eu-west-2",
             "collectionName": "eddi_kbid_5f2a9c1e7b3d", "tableName": "eddi_kb_product_docs_v2", "apiKey": "aZ3kP9qR2mX7vB4nL8tY",
             "secretValue": "aZ3kP9qR2mX7vB4nL8tY", "random": "aZ3kP9qR2mX7vB4nL8tY"}
    out = scrub({"embeddingParameters": given})["embeddingParameters"]
    assert {k: out[k] for k in ("model", "modelName", "deploymentName", "collectionName", "tableName")} == \
        {k: given[k] for k in ("model", "modelName", "deploymentName", "collectionName", "tableName")}
    assert out["apiKey"] == out["secretValue"] == out["random"] == "${vault:REDACTED}"


def resources_of(runtime) -> dict[tuple[str, str], dict]:
    return {(kind, id): runtime.resources.read(kind, id) for kind in ("agents", "workflows", "rags", "llm", "httpcalls")
            for id in runtime.resources.ids(kind)}


def test_export_in_eddis_layout_and_import_of_it_is_the_identity(client, tmp_path):
    runtime = client.runtime
    load_bundle(runtime.saving, EXAMPLES)
    # a literal secret in a KB's parameters (EDDI exports scrub these)
    policies = runtime.resources.read("rags", "travel-policies")
    runtime.resources.update("rags", "travel-policies", 1, {**policies, "embeddingProvider": "openai",
                                                            "embeddingParameters": {"apiKey": "sk-literal-key"}})
    runtime.resources.update("workflows", "travel-assistant", 1, json.loads(json.dumps(
        runtime.resources.read("workflows", "travel-assistant")).replace("travel-policies?version=1", "travel-policies?version=2")))
    workflow_version = runtime.resources.current_version("workflows", "travel-assistant")
    agent = runtime.resources.read("agents", "travel-assistant")
    runtime.resources.update("agents", "travel-assistant", 1, {**agent, "workflows": [
        f"eddi://ai.labs.workflow/workflowstore/workflows/travel-assistant?version={workflow_version}"]})

    r = client.post("/backup/export/travel-assistant")
    assert r.status_code == 200 and r.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(r.content))
    folder = f"travel-assistant/{workflow_version}/"
    assert set(archive.namelist()) == {
        "travel-assistant.agent.json", "travel-assistant.descriptor.json",
        f"{folder}travel-assistant.workflow.json", f"{folder}travel-assistant.descriptor.json",
        f"{folder}travel-policies.rag.json", f"{folder}travel-policies.descriptor.json",
        f"{folder}loyalty-program.rag.json", f"{folder}loyalty-program.descriptor.json",
        f"{folder}service-notices.httpcalls.json", f"{folder}service-notices.descriptor.json",
        f"{folder}travel-assistant.langchain.json", "eddi-rag-export-notes.json"}  # (the KBs' local/sqlite: EDDI's nearest)
    workflow = json.loads(archive.read(f"{folder}travel-assistant.workflow.json"))
    uris = [s["config"]["uri"] for s in workflow["workflowSteps"]]
    assert "eddi://ai.labs.apicalls/apicallstore/apicalls/service-notices?version=1" in uris  # EDDI's form
    assert "eddi://ai.labs.llm/llmstore/llms/travel-assistant?version=1" in uris
    exported_kb = json.loads(archive.read(f"{folder}travel-policies.rag.json"))
    assert exported_kb["embeddingParameters"]["apiKey"] == "${vault:REDACTED}"
    assert json.loads(archive.read(f"{folder}travel-policies.descriptor.json"))["resource"].endswith("travel-policies?version=2")

    other = Runtime(tmp_path / "other")
    try:
        with TestClient(create_app(other)) as back:
            imported = back.post("/backup/import", content=r.content, headers={"Content-Type": "application/zip"})
            assert imported.status_code == 201, imported.text
            (secret,) = imported.json()["redacted"]  # named in the import's answer
            assert "travel-policies" in secret and "$.embeddingParameters.apiKey" in secret
        before, after = resources_of(runtime), resources_of(other)
        assert set(before) == set(after)
        for key, data in before.items():
            # the identity, but for the scrubbed secret and the versions the import starts again at 1
            expected = json.loads(json.dumps(scrub(data)).replace(f"?version={workflow_version}", "?version=1")
                                  .replace("travel-policies?version=2", "travel-policies?version=1"))
            assert after[key] == expected, key
        checks = [c for c in other.health.checks("travel-policies") if not c.ok]
        assert checks[0].check == "secrets" and "$.embeddingParameters.apiKey" in checks[0].detail  # the doctor says so
    finally:
        other.close()


def test_cli_export_then_load(tmp_path):
    data, other = str(tmp_path / "a"), str(tmp_path / "b")
    with Runtime(data) as runtime:
        load_bundle(runtime.saving, EXAMPLES)
    out = tmp_path / "agent.zip"
    result = in_process("export", "travel-assistant", "--out", str(out), "--data-dir", data)
    assert result.returncode == 0, result.stderr
    assert zipfile.ZipFile(out).namelist()[0] == "travel-assistant.agent.json"
    assert in_process("load", str(out), "--data-dir", other).returncode == 0
    with Runtime(data) as a, Runtime(other) as b:
        assert resources_of(a) == resources_of(b)
    missing = in_process("export", "nobody", "--data-dir", data)
    assert missing.returncode == 1 and "agents/nobody not found" in missing.stderr


@pytest.mark.integration
def test_eddis_embedding_parameters_are_honoured():
    """Row 9: openai organizationId/projectId, maxRetries, timeout in milliseconds, modelName
    (labsai/EDDI configs/rag/model/EmbeddingParameters.java, HONOURED), against a local server speaking OpenAI's API."""
    factory = EmbeddingModelFactory(None, SecretResolver(environ={}))
    with OpenAIStandIn() as server:
        params = {"apiKey": "sk-1", "baseUrl": server.base_url, "modelName": "text-embedding-3-large", "dimensions": 16,
                  "organizationId": "org-1", "projectId": "proj-1", "timeout": 5000, "maxRetries": 1}
        model = factory.get("openai", params)
        assert model.inner.request_timeout == 5.0  # 5000 ms
        server.fail_next = [500]
        assert len(model.embed_documents(["a"])[0]) == 16
        assert len(server.requests) == 2  # one retry, as maxRetries: 1 says
        request = server.requests[-1]
        assert (request["headers"]["openai-organization"], request["headers"]["openai-project"]) == ("org-1", "proj-1")
        assert request["json"]["model"] == "text-embedding-3-large"
        server.fail_next = [500]
        with pytest.raises(Exception, match="500|Internal|stand-in|Incorrect"):
            factory.get("openai", {**params, "maxRetries": 0}).embed_documents(["b"])
        assert len(server.requests) == 3  # no retry
    assert factory.get("ollama", {"timeoutSeconds": 7}).inner.sync_client_kwargs == {"timeout": 7.0}
    for provider, extra in [("vertex", {"project": "p", "endpoint": "https://europe-west4-aiplatform.googleapis.com"}),
                            ("mistral", {"apiKey": "k", "modelName": "mistral-embed", "timeout": 3000, "maxRetries": 2}),
                            ("cohere", {"apiKey": "k", "modelName": "embed-english-v3.0", "timeout": 3000})]:
        assert registry.validate_parameters(registry.EMBEDDINGS, provider, extra) == [], provider


def test_a_timeout_saved_in_seconds_stays_seconds(tmp_path):
    """Row 9: timeout is milliseconds now; knowledge bases saved before (seconds) keep their timeout as timeoutSeconds."""
    data = tmp_path / "data"
    with Runtime(data) as rt:
        kb = rt.resources.create("rags", {"name": "o", "embeddingProvider": "ollama", "embeddingParameters": {"timeout": 30}}).id
        rt.db.execute("DROP TABLE global_variables")  # as the release of schema version 3 left it
        with rt.db.transaction() as c:  # (PRAGMA user_version on SQLite)
            rt.db.set_schema_version(c, 3)
    with Runtime(data) as rt:
        assert state.version(rt.db) == state.LATEST
        assert rt.resources.read("rags", kb)["embeddingParameters"] == {"timeoutSeconds": 30}


@pytest.mark.integration
@pytest.mark.services
def test_global_variables_resolve_in_store_and_embedding_parameters(client, pgvector_params):
    """Row 10: ${vars:key} and ${vars:tenant/key} (labsai/EDDI configs/variables/GlobalVariableResolver.java), set
    through EDDI's /variablestore/variables/{tenantId}/{key}, resolved when the knowledge base is used."""
    url = pgvector_params["url"]
    assert client.put("/variablestore/variables/default/pg-url", json={"key": "pg-url", "value": url}).status_code == 200
    assert client.get("/variablestore/variables/default").json() == [
        {"key": "pg-url", "value": url, "description": None, "exportable": True}]
    assert client.get("/variablestore/variables/other-tenant").status_code == 404  # only the caller's tenant
    r = client.post(BASE, json={"name": "vars", "embeddingProvider": "local", "storeType": "pgvector",
                             "storeParameters": {"url": "${vars:pg-url}", "tableName": "vars_kb_table"}})
    assert r.status_code == 201, r.text
    kb = kb_id(r)
    assert client.get(f"{BASE}/{kb}").json()["storeParameters"]["url"] == "${vars:pg-url}"  # stored as written
    try:
        assert client.post(f"{BASE}/{kb}/documents", json={"documents": [{"document_id": "a.md", "text": "Alpha."}]}).status_code == 200
        assert client.get(f"{BASE}/{kb}/health").json()["status"] == "ok"
    finally:
        client.runtime.documents.drop(kb)
    assert client.post(BASE, json={"name": "x", "embeddingProvider": "local", "storeType": "pgvector",
                                "storeParameters": {"url": "${vars:acme/pg-url}"}}).json()["errors"][0]["path"] == "$.storeParameters"
    unset = kb_id(client.post(BASE, json={"name": "unset", "embeddingProvider": "local", "storeType": "pgvector",
                                       "storeParameters": {"url": "${vars:nope}"}}))
    failing = [c for c in client.runtime.health.checks(unset) if not c.ok]
    assert failing[0].check == "secrets" and "${vars:nope}" in failing[0].detail  # the doctor names it
    assert client.delete("/variablestore/variables/default/pg-url").status_code == 200
    assert client.get("/variablestore/variables/default/pg-url").status_code == 404


@pytest.mark.integration
def test_httpcall_rag_templates_the_whole_call_and_caps_what_it_injects(runtime):
    """Rows 13, 16: EDDI templates the whole httpCall with the turn's data (LlmTask.executeHttpCallRag puts
    userInput beside memory, properties and context) and caps the injected JSON at maxRagContextChars;
    maxSystemPromptChars caps the whole prompt."""
    from eddi_rag.workflow.memory import ConversationMemory
    from tests.test_workflow import TASK, SearchServer, make_agent, step

    server = SearchServer()
    try:
        calls = runtime.resources.create("httpcalls", {"targetServerUrl": server.url, "httpCalls": [{
            "name": "search", "saveResponse": True, "request": {
                "method": "POST", "path": "/search/{properties.region}", "contentType": "application/json",
                "queryParams": {"q": "{memory.current.input}", "lang": "{properties.lang}", "missing": "{nothing.here}"},
                "headers": {"X-Channel": "{context.channel}", "X-User": "{userInfo.userId}"},
                "body": {"query": "{userInput}", "agent": "{conversationInfo.agentId}"}}}]})
        agent = make_agent(runtime, [step(calls.uri, "eddi://ai.labs.httpcalls")])
        task = {**TASK, "httpCallRag": "search", "maxRagContextChars": 20}
        memory = ConversationMemory(agent, user_input="Züge nach Wien", user_id="u1",
                                    properties={"lang": "de", "region": "at/east"}, context={"channel": "web"})
        runtime.llm_task.execute(memory, task, None)
        (req,) = server.requests
        assert req["path"] == "/search/at%2Feast?q=Z%C3%BCge+nach+Wien&lang=de&missing="
        assert (req["headers"]["X-Channel"], req["headers"]["X-User"]) == ("web", "u1")
        assert json.loads(req["body"]) == {"query": "Züge nach Wien", "agent": agent}
        capped = runtime.llm_task.execute(ConversationMemory(agent, user_input="x"), task, None)
        injected = unquoted(capped.system_message.split("## Search Results:\n", 1)[1])
        assert injected == json.dumps({"body": {"hits": ["Vienna departures: 22:10"]}, "httpCode": 200})[:20] + \
            "\n[... context truncated at 20 characters ...]"
        short = runtime.llm_task.execute(ConversationMemory(agent, user_input="x"), {**task, "maxSystemPromptChars": 30}, None)
        assert short.system_message == capped.system_message[:30] + "\n[... system prompt truncated at 30 characters ...]"
    finally:
        server.close()


def test_a_failed_expansion_is_an_eddi_warning_entry(runtime, monkeypatch):
    """Row 19: EDDI's trace has {kb, warning} entries beside {kb, error} and the successful ones."""
    from tests.test_workflow import make_kb

    kb = make_kb(runtime, "Trains", {"rail.md": "The night train to Vienna leaves at 22:10 from platform 4."}, minScore=0)
    monkeypatch.setattr(runtime.retriever, "gather", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("store hiccup")))
    found = runtime.turns.context(kb, "night train to Vienna")
    warnings = [e for e in found["trace"] if "warning" in e]
    assert warnings == [{"kb": "Trains", "warning": "context expansion failed, its hits are used alone: RuntimeError: store hiccup"}]
    assert "22:10" in found["section"]


def test_descriptors_have_eddis_fields_and_dates_in_epoch_milliseconds(client):
    """Row 18: EDDI's DocumentDescriptor (configs/descriptors/model/DocumentDescriptor.java and its
    ResourceDescriptor): resource, name, description, createdBy, createdOn, lastModifiedBy, lastModifiedOn,
    originId, deleted; dates as epoch milliseconds (Java Date in JSON)."""
    import time

    before = int(time.time() * 1000)
    kb = kb_id(client.post(BASE, json={"name": "described", "embeddingProvider": "local"}))
    (d,) = client.get(f"{BASE}/descriptors").json()
    assert set(d) == {"resource", "name", "description", "createdBy", "createdOn", "lastModifiedBy", "lastModifiedOn",
                      "originId", "deleted"}
    assert d["resource"].endswith(f"/{kb}?version=1") and d["name"] == "described" and d["deleted"] is False
    assert isinstance(d["createdOn"], int) and before - 1000 <= d["createdOn"] <= d["lastModifiedOn"]


EDDI_CONTEXT = {"contextExpansion": "none", "queryStrategy": "raw", "contextMerge": "workflow", "sourceLabels": False,
                "noRelevantContextMessage": ""}


def test_what_the_model_sees_keeps_our_defaults_and_the_fields_restore_eddis(runtime):
    """Row 12: neighbour expansion, the accumulated topic, the cross-KB merge, source labels and the no-context
    message are ours by default; contextExpansion "none", queryStrategy "raw", contextMerge "workflow",
    sourceLabels false and noRelevantContextMessage "" give EDDI's RagContextProvider output."""
    from eddi_rag.resource_types import resource_uri
    from eddi_rag.workflow.memory import ConversationMemory
    from tests.test_workflow import TASK, make_agent, make_kb, step

    trains = make_kb(runtime, "Trains", {"rail.md": "The night train to Vienna leaves at 22:10 from platform 4.",
                                         "bus.md": "Replacement buses run when the line to Vienna is closed."}, maxResults=2, minScore=0)
    food = make_kb(runtime, "Food", {"menu.md": "The dining car on the Vienna train serves goulash until 21:00."},
                   maxResults=1, minScore=0)
    agent = make_agent(runtime, [step(resource_uri("rags", trains, 1)), step(resource_uri("rags", food, 1))])
    task = {**TASK, "enableWorkflowRag": True}

    def turn(extra: dict, message: str, history: list | None = None):
        memory = ConversationMemory(agent, user_input=message, history=history or [])
        return runtime.llm_task.execute(memory, {**task, **extra}, None), memory

    ours, _ = turn({}, "When does the dining car on the Vienna train close?")
    eddi, _ = turn(EDDI_CONTEXT, "When does the dining car on the Vienna train close?")
    assert "[Source 1: menu.md, whole document]" in ours.system_message  # labels; the best hits of all KBs by score: Food first
    assert ours.system_message.index("### Source: Food") < ours.system_message.index("### Source: Trains")
    context = eddi.system_message.split("## Relevant Context:\n", 1)[1]
    assert "[Source" not in context  # EDDI: the KB's name, then each chunk's text, KB after KB in workflow order
    assert context.index("### Source: Trains") < context.index("### Source: Food")
    assert context.count("Vienna") == 3  # Trains' two chunks (its maxResults) and Food's one

    history = [("user", "Tell me about the night train to Vienna."), ("assistant", "It leaves at 22:10.")]
    _, followed = turn({}, "and the buses?", history)
    _, raw = turn(EDDI_CONTEXT, "and the buses?", history)
    assert followed.data["rag:trace:" + TASK["id"]][0]["queryStrategy"] == "contextualised"
    assert raw.data["rag:trace:" + TASK["id"]][0]["queryStrategy"] == "raw"

    nothing = {"knowledgeBases": [{"name": "Trains", "minScore": 0.99}]}
    miss, _ = turn(nothing, "What is the weather on Mars?")
    silent, _ = turn({**nothing, **EDDI_CONTEXT}, "What is the weather on Mars?")
    assert "## Relevant Context:" in miss.system_message and "## Relevant Context:" not in silent.system_message


# Each row of ../shared/EDDI-REFERENCE.md's table of differences (read 2026-11-23) -> the tests holding it.
DIFFERENCES = {
    1: ["tests/test_eddi_stores.py::test_a_table_eddi_6_5_wrote_is_read_and_written_in_place",
        "tests/test_eddi_stores.py::test_eddis_id_namespace_tags_chunks_and_keeps_a_shared_table_apart",
        "tests/test_eddi_stores.py::test_a_chroma_collection_langchain4j_wrote_is_read_and_written_in_place",
        "tests/test_eddi_stores.py::test_a_qdrant_collection_in_langchain4j_layout_is_read_and_written_in_place"],
    2: ["tests/test_api.py::test_ingestions_append_as_in_eddi_and_replace_is_opt_in"],
    3: ["tests/test_eddi_compat.py::test_eddis_llm_and_httpcall_paths_are_canonical_and_ours_still_answer"],
    4: ["tests/test_eddi_sources.py::test_eddis_source_json_is_accepted_with_its_limits",
        "tests/test_eddi_sources.py::test_the_crawl_keeps_to_eddis_scope", "tests/test_eddi_sources.py::test_cron_and_enabled",
        "tests/test_eddi_sources.py::test_settings_budgets_cost_and_content_length",
        "tests/test_sources.py::test_an_incomplete_crawl_deletes_nothing"],
    5: ["tests/test_eddi_sources.py::test_upload_sources_keep_their_files"],
    6: ["tests/test_eddi_sources.py::test_purge_keeps_the_vectors_and_later_runs_sweep_what_is_gone"],
    7: ["tests/test_eddi_sources.py::test_eddis_verbs_bodies", "tests/test_eddi_sources.py::test_upload_sources_keep_their_files"],
    8: ["tests/test_eddi_stores.py::test_store_namespace_follows_eddis_defaults_and_is_refused_where_it_is_not_supported"],
    9: ["tests/test_eddi_compat.py::test_eddis_embedding_parameters_are_honoured",
        "tests/test_eddi_compat.py::test_a_timeout_saved_in_seconds_stays_seconds"],
    10: ["tests/test_eddi_compat.py::test_global_variables_resolve_in_store_and_embedding_parameters"],
    11: ["tests/test_auth.py::test_each_role_on_each_endpoint_family", "tests/test_auth.py::test_oidc_tokens_verified_against_the_jwks"],
    12: ["tests/test_eddi_compat.py::test_what_the_model_sees_keeps_our_defaults_and_the_fields_restore_eddis"],
    13: ["tests/test_eddi_compat.py::test_httpcall_rag_templates_the_whole_call_and_caps_what_it_injects"],
    14: ["tests/test_provider_refs.py::test_a_kb_with_embedding_disabled_says_why_and_nothing_crashes"],
    15: ["tests/test_eddi_compat.py::test_export_in_eddis_layout_and_import_of_it_is_the_identity",
         "tests/test_eddi_compat.py::test_cli_export_then_load", "tests/test_eddi_compat.py::test_the_scrubber_follows_eddis_rules"],
    16: ["tests/test_eddi_compat.py::test_httpcall_rag_templates_the_whole_call_and_caps_what_it_injects"],
    17: ["tests/test_api.py::test_ingest_errors"],
    18: ["tests/test_eddi_compat.py::test_descriptors_have_eddis_fields_and_dates_in_epoch_milliseconds"],
    19: ["tests/test_eddi_compat.py::test_a_failed_expansion_is_an_eddi_warning_entry",
         "tests/test_workflow.py::test_context_cap_skips_passages_with_a_visible_marker"],
    20: ["tests/test_eddi_configs.py::test_an_eddi_store_configuration_is_accepted_kept_and_works"],
}


def test_every_row_of_the_differences_table_has_its_tests():
    import ast

    root = Path(__file__).resolve().parent.parent
    assert sorted(DIFFERENCES) == list(range(1, 21))
    for row, tests in DIFFERENCES.items():
        for test in tests:
            path, name = test.split("::")
            tree = ast.parse((root / path).read_text(encoding="utf-8"))
            assert name in {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}, (row, test)
