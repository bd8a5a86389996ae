"""A resource of another tenant does not exist for a caller anywhere, also when named by URI: refused
when saved (400 naming the reference), and skipped when read (workflow traversal, agent turns over
REST and in process, the LlmTask hook, LangGraph, MCP, providers-map references), for resources saved
before the check existed too. (Routes that take ids are walked in test_auth.)"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.interop.langgraph import rag_runnable
from eddi_rag.resource_types import ResourceNotFoundError
from eddi_rag.runtime import Runtime
from eddi_rag.workflow.memory import ConversationMemory

SECRET = "The A-tenant launch code is 4711."
A_SYSTEM = "You are tenant A's private assistant."
KB = {"name": "Launch", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0}


def as_(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def created(response) -> str:
    assert response.status_code == 201, response.text
    return response.headers["Location"]


def task(system: str) -> dict:
    return {"tasks": [{"id": "answer", "enableWorkflowRag": True, "parameters": {"systemMessage": system}}]}


def workflow(*steps: tuple[str, str]) -> dict:
    return {"workflowSteps": [{"type": t, "config": {"uri": uri}} for t, uri in steps]}


@pytest.fixture
def two_tenants(tmp_path):
    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as client:
        a, b = as_(runtime.keys.create("A", "admin")[1]), as_(runtime.keys.create("B", "admin")[1])
        kb_uri = created(client.post("/ragstore/rags", json=KB, headers=a))
        kb = kb_uri.split("/")[-1].split("?")[0]
        assert client.post(f"/ragstore/rags/{kb}/documents", headers=a,
                           json={"documents": [{"document_id": "codes.md", "text": SECRET}]}).status_code == 200
        llm_uri = created(client.post("/llmstore/llmconfigs", json=task(A_SYSTEM), headers=a))
        wf_uri = created(client.post("/workflowstore/workflows", headers=a,
                                     json=workflow(("eddi://ai.labs.rag", kb_uri), ("eddi://ai.labs.llm", llm_uri))))
        agent_uri = created(client.post("/agentstore/agents", json={"workflows": [wf_uri]}, headers=a))
        provider_uri = created(client.post("/providerstore/providers", json={"type": "ollama"}, headers=a))
        client.a, client.b, client.runtime = a, b, runtime
        client.uris = {"kb": kb_uri, "llm": llm_uri, "workflow": wf_uri, "agent": agent_uri, "provider": provider_uri}
        yield client
    runtime.close()


def id_of(uri: str) -> str:
    return uri.split("/")[-1].split("?")[0]


def test_saving_a_reference_to_another_tenants_resource_is_400_naming_it(two_tenants):
    c, u = two_tenants, two_tenants.uris
    b_llm = created(c.post("/llmstore/llmconfigs", json=task("B's own."), headers=c.b))
    refused = [("/workflowstore/workflows", workflow(("eddi://ai.labs.rag", u["kb"]), ("eddi://ai.labs.llm", b_llm)),
                "$.workflowSteps[0].config.uri"),
               ("/workflowstore/workflows", workflow(("eddi://ai.labs.llm", u["llm"])), "$.workflowSteps[0].config.uri"),
               ("/agentstore/agents", {"workflows": [u["workflow"]]}, "$.workflows[0]")]
    for path, body, field in refused:
        r = c.post(path, json=body, headers=c.b)
        assert r.status_code == 400, (path, r.text)
        assert [e["path"] for e in r.json()["errors"]] == [field] and "in this tenant" in r.json()["errors"][0]["message"]
    # a missing resource reads exactly as another tenant's (nothing tells B that A's exists)
    missing = u["kb"].replace(id_of(u["kb"]), "0" * 24)
    r = c.post("/workflowstore/workflows", json=workflow(("eddi://ai.labs.rag", missing)), headers=c.b)
    assert r.status_code == 400 and r.json()["errors"][0]["message"].replace("0" * 24, id_of(u["kb"])) == \
        c.post("/workflowstore/workflows", json=workflow(("eddi://ai.labs.rag", u["kb"])), headers=c.b).json()["errors"][0]["message"]
    # updates are checked too, and A may save what names its own
    own = created(c.post("/workflowstore/workflows", json=workflow(("eddi://ai.labs.llm", b_llm)), headers=c.b))
    assert c.put(f"/workflowstore/workflows/{id_of(own)}?version=1", json=workflow(("eddi://ai.labs.rag", u["kb"])),
                 headers=c.b).status_code == 400
    assert c.post("/agentstore/agents", json={"workflows": [u["workflow"]]}, headers=c.a).status_code == 201
    # a version that does not exist does not resolve either
    later = u["workflow"].replace("version=1", "version=7")
    assert c.post("/agentstore/agents", json={"workflows": [later]}, headers=c.a).status_code == 400


@pytest.fixture
def legacy(two_tenants):
    """B's resources naming A's, as a database written before references were checked holds them."""
    c, u, resources = two_tenants, two_tenants.uris, two_tenants.runtime.resources
    b_llm = resources.create("llm", task("B's own system message."), tenant="B").uri
    names_kb = resources.create("workflows", workflow(("eddi://ai.labs.rag", u["kb"]), ("eddi://ai.labs.llm", b_llm)), tenant="B").uri
    names_llm = resources.create("workflows", workflow(("eddi://ai.labs.llm", u["llm"])), tenant="B").uri
    c.agents = {"kb": resources.create("agents", {"workflows": [names_kb]}, tenant="B").id,
                "llm": resources.create("agents", {"workflows": [names_llm]}, tenant="B").id,
                "workflow": resources.create("agents", {"workflows": [u["workflow"]]}, tenant="B").id}
    return c


def leaks(turn) -> bool:
    text = repr(turn)
    return "launch code is 4711" in text or A_SYSTEM in text  # (not "4711" alone: a random id may hold it)


def test_a_turn_never_reads_another_tenants_resources(legacy):
    c, runtime = legacy, legacy.runtime
    for what, agent in c.agents.items():
        r = c.post(f"/agentstore/agents/{agent}/turn", json={"message": "What is the launch code?"}, headers=c.b)
        assert not leaks(r.json()), (what, r.text)  # REST
        if r.status_code == 200:
            assert any("in this tenant" in s or "not found" in s for s in r.json()["skipped"]), (what, r.json())
        in_process = [lambda: runtime.turn(agent, "What is the launch code?"),
                      lambda: runtime.turns.run(ConversationMemory(agent_id=agent, user_input="What is the launch code?")),
                      lambda: runtime.llm_task.execute(ConversationMemory(agent_id=agent, user_input="What is the launch code?"),
                                                       {"id": "answer", "enableWorkflowRag": True}),
                      lambda: rag_runnable(runtime.turns, agent).invoke({"messages": [("human", "What is the launch code?")]})]
        for run in in_process:
            try:
                result = run()
            except Exception as e:  # noqa: BLE001 - no LLM task found is fine; a leak is not
                result = e
            assert not leaks(result), (what, result)
    # A's own agent still answers with A's chunks and system message; B may not turn it at all
    a_agent = id_of(c.uris["agent"])
    assert "4711" in c.post(f"/agentstore/agents/{a_agent}/turn", json={"message": "launch code?"}, headers=c.a).text
    assert c.post(f"/agentstore/agents/{a_agent}/turn", json={"message": "launch code?"}, headers=c.b).status_code == 404
    with pytest.raises(ResourceNotFoundError):
        runtime.traversal.discover(a_agent, tenant="B")


def test_a_providers_map_reference_resolves_only_in_the_kbs_tenant(two_tenants):
    c = two_tenants
    mine = {**KB, "embeddingProvider": None, "embeddingProviderId": id_of(c.uris["provider"])}
    mine.pop("embeddingProvider")
    b_kb = id_of(created(c.post("/ragstore/rags", json=mine, headers=c.b)))  # an entry may come later: saved
    assert "names no entry" in c.get(f"/ragstore/rags/{b_kb}/health", headers=c.b).json()["embedding"]["reason"]
    a_kb = id_of(created(c.post("/ragstore/rags", json=mine, headers=c.a)))
    assert c.get(f"/ragstore/rags/{a_kb}/health", headers=c.a).json()["embedding"]["status"] == "ok"


def test_mcp_finds_only_the_callers_knowledge_bases(two_tenants):
    import asyncio

    from eddi_rag.auth import Principal
    from eddi_rag.interop.mcp import build_server

    b = Principal("B", "admin", subject="b")
    server = build_server(two_tenants.runtime, lambda headers: b)
    kb = id_of(two_tenants.uris["kb"])
    for ref in (kb, "Launch"):  # a failed call is an error result (EDDI's MCP contract), as REST's 404
        result = asyncio.run(server.call_tool("search_knowledge_base", {"knowledge_base_id": ref, "query": "launch code"}))
        text = " ".join(getattr(part, "text", "") for part in result.content)
        assert result.is_error and "no knowledge base" in text and "NOT_FOUND" in text, text
        assert "Launch" not in text.replace(f"'{ref}'", "").replace(f'"{ref}"', ""), text


def test_a_resource_uri_in_the_resource_id_route_of_another_kind_is_not_found(two_tenants):
    c = two_tenants
    for kind, uri in (("llmstore/llmconfigs", c.uris["llm"]), ("workflowstore/workflows", c.uris["workflow"])):
        assert c.get(f"/{kind}/{id_of(uri)}", headers=c.b).status_code == 404
