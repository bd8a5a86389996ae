"""Importing an EDDI agent export (the zip of EDDI's POST /backup/export/{agentId}; layout read from
labsai/EDDI's RestExportService): the agent, its workflows, RAG, LLM and httpCall configurations with
their references rewritten, what is skipped reported, all or nothing."""

import io
import json
import subprocess
import sys
import zipfile

import pytest

from eddi_rag.resource_types import parse_uri
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.eddi_import import ExportError, import_agent_export

AGENT, WF = "6740a1b2c3d4e5f6a7b8c9d0", "6740a1b2c3d4e5f6a7b8c9d1"
RAG, LLM, CALLS, RULES = "rag0000000000000000000001", "llm0000000000000000000001", "api0000000000000000000001", "rul0000000000000000000001"


def export_zip(legacy: bool = False, rag: dict | None = None) -> bytes:
    """An export as EDDI writes it: v6 URIs (apicalls, llms), or v5 (packages, langchains)."""
    wf_uri = (f"eddi://ai.labs.package/packagestore/packages/{WF}?version=2" if legacy
              else f"eddi://ai.labs.workflow/workflowstore/workflows/{WF}?version=2")
    llm_uri = (f"eddi://ai.labs.langchain/langchainstore/langchains/{LLM}?version=1" if legacy
               else f"eddi://ai.labs.llm/llmstore/llms/{LLM}?version=1")
    steps = [
        {"type": "eddi://ai.labs.behavior", "config": {"uri": f"eddi://ai.labs.rules/rulestore/rulesets/{RULES}?version=1"}},
        {"type": "eddi://ai.labs.rag", "config": {"uri": f"eddi://ai.labs.rag/ragstore/rags/{RAG}?version=3"}},
        {"type": "eddi://ai.labs.httpcalls", "config": {"uri": f"eddi://ai.labs.apicalls/apicallstore/apicalls/{CALLS}?version=1"}},
        {"type": "eddi://ai.labs.llm", "config": {"uri": llm_uri}},
    ]
    files = {
        f"{AGENT}.agent.json": {"workflows": [wf_uri], "description": "Support bot"},
        f"{AGENT}.descriptor.json": {"name": "Support bot", "description": "answers from the handbook"},
        f"{WF}/2/{WF}.{'package' if legacy else 'workflow'}.json": {"workflowSteps": steps},
        f"{WF}/2/{WF}.descriptor.json": {"name": "main"},
        f"{WF}/2/{RAG}.rag.json": rag or {"name": "Handbook", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0},
        f"{WF}/2/{RAG}.descriptor.json": {"name": "Handbook"},
        f"{WF}/2/{CALLS}.httpcalls.json": {"targetServerUrl": "https://api.example.com", "httpCalls": [{"name": "search"}]},
        f"{WF}/2/{LLM}.langchain.json": {"tasks": [{"id": "answer", "type": "openai", "knowledgeBases": [{"name": "Handbook"}],
                                                    "parameters": {"systemMessage": "Answer from the handbook.", "apiKey": "${vault:openaiKey}"}}]},
        f"{WF}/2/{RULES}.behavior.json": {"behaviorGroups": []},
        "greeting.snippet.json": {"text": "Hello"},
    }
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for path, body in files.items():
            z.writestr(path, json.dumps(body))
    return buffer.getvalue()


@pytest.mark.parametrize("legacy", [False, True])
def test_an_export_imports_with_references_rewritten_and_runs_a_turn(tmp_path, legacy):
    with Runtime(tmp_path) as runtime:
        report = import_agent_export(runtime.resources, export_zip(legacy))
        assert [r.kind for r in report.created] == ["rags", "httpcalls", "llm", "workflows", "agents"]
        assert [r.id for r in report.created] == [RAG, CALLS, LLM, WF, AGENT]  # the export's ids, free here
        workflow = runtime.resources.read("workflows", WF)
        uris = [s["config"]["uri"] for s in workflow["workflowSteps"]]
        assert uris[1:] == [r.uri for r in report.created[:3]]
        assert uris[0].startswith("eddi://ai.labs.rules/")  # kept as it was
        assert runtime.resources.read("agents", AGENT)["workflows"] == [report.created[3].uri]
        assert any("behavior rules" in s and RULES in s for s in report.kept)
        assert any("greeting.snippet.json (prompt snippet)" in s for s in report.kept)
        assert runtime.resources.read("llm", LLM)["tasks"][0]["parameters"]["apiKey"] == "${vault:openaiKey}"
        runtime.ingest(RAG, "handbook.md", "Refunds are paid within 14 days of a cancelled order.")
        turn = runtime.turn(AGENT, "How fast are refunds paid?")
        assert turn["knowledgeBases"] == ["Handbook"] and "14 days" in turn["systemMessage"]
        again = import_agent_export(runtime.resources, export_zip(legacy))  # ids taken now: new ones
        assert all(r.id != old.id for r, old in zip(again.created, report.created))
        assert runtime.resources.read("agents", again.agents[0].id)["workflows"] == [again.created[3].uri]


def test_a_bad_export_writes_nothing_and_says_why(tmp_path):
    with Runtime(tmp_path) as runtime:
        with pytest.raises(ExportError, match=r"\.rag\.json: .*chunkOverlap"):
            import_agent_export(runtime.resources, export_zip(rag={"name": "x", "chunkSize": 10, "chunkOverlap": 20}))
        with pytest.raises(ExportError, match="not a zip file"):
            import_agent_export(runtime.resources, b"PK not really")
        empty = io.BytesIO()
        with zipfile.ZipFile(empty, "w") as z:
            z.writestr("notes.json", "{}")
        with pytest.raises(ExportError, match=r"no <agentId>\.agent\.json"):
            import_agent_export(runtime.resources, empty.getvalue())
        assert all(runtime.resources.descriptors(kind) == [] for kind in ("rags", "agents", "workflows", "llm", "httpcalls"))


def test_the_rest_import_answers_201_with_the_agent(client):
    r = client.post("/backup/import", content=export_zip(), headers={"Content-Type": "application/zip"})
    assert r.status_code == 201, r.text
    assert parse_uri(r.headers["Location"]).kind == "agents" and len(r.json()["created"]) == 5
    bad = client.post("/backup/import", content=b"nope", headers={"Content-Type": "application/zip"})
    assert bad.status_code == 400 and "not a zip file" in bad.json()["error"]


@pytest.mark.integration
def test_cli_load_takes_an_export(tmp_path):
    path = tmp_path / "Support+bot-agent-1.zip"
    path.write_bytes(export_zip())
    result = subprocess.run([sys.executable, "-m", "eddi_rag.cli", "load", str(path), "--data-dir", str(tmp_path / "data")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("eddi://") == 5 and "kept: workflow" in result.stderr and "imported 1 agent(s)" in result.stderr


@pytest.mark.parametrize("rag,calls,reason", [
    # registry and parameters (issue 20, defect 2: the import checked the JSON Schema only)
    ({"name": "H", "embeddingProvider": "no-such-provider", "storeType": "sqlite"}, None, "$.embeddingProvider"),
    ({"name": "H", "embeddingProvider": "local", "storeType": "sqlite", "storeParameters": {"path": "/etc/kb.db"}}, None,
     "$.storeParameters.path"),
    ({"name": "H", "embeddingProvider": "local", "storeType": "sqlite",
      "sources": [{"name": "meta", "web": {"startUrl": "http://169.254.169.254/"}}]}, None, "$.sources[0].web.startUrl"),
    (None, {"targetServerUrl": "http://169.254.169.254/latest", "httpCalls": []}, "$.targetServerUrl"),
])
def test_the_rest_import_applies_every_save_rule(client, rag, calls, reason):
    data = export_zip(rag=rag)
    if calls is not None:
        buffer = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(buffer, "w") as dst:
            for info in src.infolist():
                dst.writestr(info, json.dumps(calls) if info.filename.endswith(".httpcalls.json") else src.read(info))
        data = buffer.getvalue()
    r = client.post("/backup/import", content=data, headers={"Content-Type": "application/zip"})
    assert r.status_code == 400 and reason in r.json()["error"], r.text
    assert client.get("/agentstore/agents/descriptors").json() == []
