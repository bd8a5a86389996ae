"""Messages that name what is true (issue 42, points 7 and 10): ``${vars:…}`` read by the save's check and the doctor
as a query reads it; a reference to a vault that is off, or to another tenant's, said as such; an LLM task naming
no knowledge base refused when saved; a chat model that does not answer is a 502 naming it, not a bare 500."""

from __future__ import annotations

import pytest

from eddi_rag.config import ConfigValidationError
from eddi_rag.resource_types import resource_uri
from eddi_rag.workflow.llm_task import ChatModelUnavailableError
from eddi_rag.workflow.memory import ConversationMemory

KB = {"name": "Docs", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0}


def test_a_global_variable_is_read_by_the_save_check_and_the_doctor_as_a_query_reads_it(client, monkeypatch):
    """It worked at query time, while the save and ``doctor`` said "not set" and the Manager showed the KB failed."""
    monkeypatch.delenv("EDDI_VAULT_MASTER_KEY", raising=False)
    assert client.put("/variablestore/variables/default/docs-file", json={"value": "docs.db"}).status_code == 200
    saved = client.post("/ragstore/rags", json={**KB, "storeParameters": {"path": "${vars:docs-file}"}})
    assert saved.status_code == 201 and saved.json()["warnings"] == [], saved.text
    kb = saved.headers["Location"].split("/")[-1].split("?")[0]
    checks = {c["check"]: c for c in client.get(f"/ragstore/rags/{kb}/verdict").json()["checks"]}
    assert checks["secrets"]["ok"] and checks["store"]["ok"], checks


def test_references_the_server_cannot_resolve_say_why(tmp_path, monkeypatch):
    from eddi_rag.runtime import Runtime

    monkeypatch.delenv("EDDI_VAULT_MASTER_KEY", raising=False)
    runtime = Runtime()  # (a vault that is off: no master key set, and no data directory to keep one in)
    off = runtime.saving.create("rags", {**KB, "name": "off", "embeddingParameters": {"apiKey": "${vault:docs-key}"}}).id
    (check,) = [c for c in runtime.health.checks(off) if c.check == "secrets"]
    assert "the secrets vault is off" in check.detail and "EDDI_VAULT_DOCS_KEY" in check.detail
    assert "EDDI_VAULT_MASTER_KEY" in check.fix  # (a PUT into a vault that is off answers 503: not the fix)
    theirs = runtime.resources.create("rags", {**KB, "name": "theirs", "embeddingParameters": {"apiKey": "${vault:B/key}"}},
                                      tenant="A").id
    (check,) = [c for c in runtime.health.checks(theirs) if c.check == "secrets"]
    assert "names the vault of tenant 'B'" in check.detail and "/secretstore/secrets/A/" in check.fix
    runtime.close()


def test_an_llm_task_naming_no_knowledge_base_is_refused_when_saved(runtime):
    with pytest.raises(ConfigValidationError) as refused:
        runtime.saving.create("llm", {"tasks": [{"id": "t", "type": "openai", "knowledgeBases": [{"name": ""}]}]})
    assert refused.value.errors[0]["path"] == "$.tasks[0].knowledgeBases[0].name"


@pytest.mark.integration  # (it reaches for a socket on loopback where nothing listens)
def test_a_chat_model_that_does_not_answer_is_a_502_naming_where_it_is(runtime):
    from langchain_openai import ChatOpenAI

    kb = runtime.saving.create("rags", KB).id
    runtime.ingest(kb, "a.md", "The night train leaves at 22:10.")
    llm = runtime.resources.create("llm", {"tasks": [{"id": "t", "type": "openai", "enableWorkflowRag": True}]}).uri
    workflow = runtime.resources.create("workflows", {"workflowSteps": [
        {"type": "eddi://ai.labs.rag", "config": {"uri": resource_uri("rags", kb, 1)}},
        {"type": "eddi://ai.labs.llm", "config": {"uri": llm}}]}).uri
    agent = runtime.resources.create("agents", {"workflows": [workflow]}).id
    model = ChatOpenAI(model="gpt-4o-mini", api_key="sk-test", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=5)
    with pytest.raises(ChatModelUnavailableError) as failed:
        runtime.turns.run(ConversationMemory(agent_id=agent, user_input="When does the train leave?"), chat_model=model)
    assert failed.value.status == 502 and "gpt-4o-mini" in str(failed.value) and "127.0.0.1:9" in str(failed.value)


def test_a_save_says_what_will_not_work_as_expected_with_its_fix(client):
    """Issue 45, points 3 and 4: a knowledge base saved without an embedding provider answered 201 with no warning; the
    ingestions then failed with kind "dependency", "retry later", where only the configuration helps. (Without storeType,
    EDDI's in-memory, it was warned of as gone after a restart; since issue 67 it is kept in the data directory.)"""
    saved = client.post("/ragstore/rags", json={"name": "bare"})
    assert saved.status_code == 201, saved.text
    said = {w["detail"].split(":")[0]: w for w in saved.json()["warnings"]}
    assert set(said) == {"$.embeddingProvider"} and 'embeddingProvider set ("local"' in said["$.embeddingProvider"]["fix"]
    kb = saved.headers["Location"].split("/")[-1].split("?")[0]
    checks = {c["check"]: c for c in client.get(f"/ragstore/rags/{kb}/verdict").json()["checks"]}
    assert "embeddingProvider" in checks["configuration"]["detail"] and "restart" not in checks["configuration"]["detail"]
    job = client.post(f"/ragstore/rags/{kb}/ingest", files={"file": ("a.md", b"# A\n\nSome text.", "text/markdown")}).json()["ingestions"][0]
    client.app.state.runtime.jobs.wait_idle()
    status = client.get(f"/ragstore/rags/{kb}/ingestion/{job['ingestionId']}/status").json()
    assert status["status"].startswith("failed: ") and "embeddingProvider set" in status["status"], status
    assert status["failure"]["kind"] == "configuration", status
    fine = client.post("/ragstore/rags", json=KB)
    assert fine.json()["warnings"] == [], fine.text


def test_an_unreachable_embedding_provider_is_named_with_its_host(client):
    """Issue 45, point 6: an unreachable provider was explained three ways, none naming the host it could not reach."""
    from tests.support.ports import free_port

    url = f"http://127.0.0.1:{free_port()}"  # (nothing listens there)
    saved = client.post("/ragstore/rags", json={**KB, "name": "Far", "embeddingProvider": "ollama",
                                                "embeddingParameters": {"baseUrl": url}})
    kb = saved.headers["Location"].split("/")[-1].split("?")[0]
    checks = {c["check"]: c for c in client.get(f"/ragstore/rags/{kb}/verdict").json()["checks"]}
    assert not checks["embeddings"]["ok"] and f"ollama at {url} did not answer" in checks["embeddings"]["detail"]
    assert url in checks["embeddings"]["fix"]
