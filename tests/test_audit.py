"""The audit record (issue 59): every face's retrieval leaves an entry naming who was shown which document versions
under which ACL; administrative actions too; the hash chain finds an edited, a removed and a moved entry, on SQLite and
PostgreSQL; the auditor role reads it and nothing else; a record that cannot be written refuses the retrieval."""

from __future__ import annotations

import json
import uuid

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.common.principals import Reader
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.search import SearchRequest
from tests.support.kbs import make_kb
from tests.support.marks import engines

BASE = "/ragstore/rags"


def retrievals(runtime: Runtime, **filters) -> list[dict]:
    return runtime.audit.entries("default", action="retrieval", **filters)


@pytest.fixture(params=engines("sqlite", "postgresql", served=("postgresql",)))
def state_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    url = request.getfixturevalue("postgres_url")
    return f"{url}{'&' if '?' in url else '?'}schema=a_{uuid.uuid4().hex[:12]}"


def test_verify_finds_an_edited_a_removed_and_a_moved_entry(state_url, tmp_path):
    with Runtime(tmp_path / "data", state_url=state_url) as runtime:
        for i in range(6):
            runtime.audit.record("default", "test.action", f"thing/{i}", {"n": i})
        assert runtime.audit.verify() == {"ok": True, "entries": 6, "problems": []}
        with runtime.db.transaction() as c:
            c.execute("UPDATE audit_entries SET detail=? WHERE seq=2", (json.dumps({"n": 99}),))
        assert runtime.audit.verify()["problems"] == [{"seq": 2, "problem": "its content does not match its hash (edited)"}]
        with runtime.db.transaction() as c:
            c.execute("UPDATE audit_entries SET detail=? WHERE seq=2", (json.dumps({"n": 1}, separators=(",", ":")),))
            c.execute("DELETE FROM audit_entries WHERE seq=4")
        assert [p["seq"] for p in runtime.audit.verify()["problems"]] == [5] and "missing" in runtime.audit.verify()["problems"][0]["problem"]
        with runtime.db.transaction() as c:  # 5 and 6 swapped: each takes the other's place and content
            rows = {r[0]: r[1:] for r in c.execute("SELECT seq, at, detail, previous, hash FROM audit_entries WHERE seq IN (5, 6)").fetchall()}
            for seq, other in ((5, 6), (6, 5)):
                c.execute("UPDATE audit_entries SET at=?, detail=?, previous=?, hash=? WHERE seq=?", (*rows[other], seq))
        problems = runtime.audit.verify()["problems"]
        assert {p["seq"] for p in problems} >= {5, 6} and any("moved" in p["problem"] for p in problems)


def test_each_face_leaves_an_entry_naming_who_was_shown_what(tmp_path):
    from click.testing import CliRunner

    from eddi_rag.cli import main

    with Runtime(tmp_path / "data") as runtime:
        kb = make_kb(runtime, "Policies", minScore=0, audience="DOCUMENT_ACL")
        runtime.ingest(kb, "salaries.md", "Salary bands rise by three percent in March.", acl=["group:hr"])
        runtime.ingest(kb, "canteen.md", "The canteen opens at noon.", acl=["public"])
        runtime.groups.set("default", "alice", ["hr"])
        _, key = runtime.keys.create("default", "editor", user="alice", name="alice's agent")
        with TestClient(create_app(runtime)) as client:
            found = client.post(f"{BASE}/{kb}/query", json={"query": "salary bands"}, headers={"Authorization": f"Bearer {key}"})
            assert found.status_code == 200, found.text
        (rest,) = retrievals(runtime, face="rest")
        assert rest["who"]["user"] == "alice" and rest["who"]["key"].startswith("key ") and key not in json.dumps(rest)
        assert rest["subject"] == kb and rest["detail"]["query"] == "salary bands" and rest["detail"]["kbVersion"] == 1
        salaries = next(d for d in rest["detail"]["documents"] if d["document"] == "salaries.md")
        assert salaries["acl"] == ["group:hr"] and salaries["version"] and salaries["chunks"][0]["id"]
        assert "group:hr" in rest["detail"]["principals"]

        runtime.search.hits(SearchRequest(kb, "canteen", reader=Reader("bob")))  # the Python API
        assert retrievals(runtime, face="python")[0]["detail"]["reader"] == "bob"
        assert [e["seq"] for e in retrievals(runtime, document="salaries.md")] == [rest["seq"]]  # who was shown it
        assert [e["detail"]["reader"] for e in retrievals(runtime, user="bob")] == ["bob"]  # what bob was shown

    result = CliRunner().invoke(main, ["query", kb, "canteen", "--data-dir", str(tmp_path / "data"), "--user", "carol"])
    assert result.exit_code == 0, result.output
    with Runtime(tmp_path / "data") as runtime:
        (cli,) = retrievals(runtime, face="cli")
        assert cli["detail"]["reader"] == "carol"
    verified = CliRunner().invoke(main, ["audit", "verify", "--data-dir", str(tmp_path / "data")])
    assert verified.exit_code == 0 and "the chain holds" in verified.output


def test_administrative_actions_are_recorded_and_only_auditors_and_admins_read_the_record(tmp_path):
    with Runtime(tmp_path / "data") as runtime, TestClient(create_app(runtime)) as client:
        keys = {role: runtime.keys.create("default", role, name=role)[1] for role in ("viewer", "editor", "admin", "auditor")}
        as_ = {role: {"Authorization": f"Bearer {k}"} for role, k in keys.items()}
        made = client.post(BASE, json={"name": "kb", "embeddingProvider": "local", "storeType": "sqlite"}, headers=as_["editor"])
        assert made.status_code == 201
        assert client.put("/ragstore/groups/dan", json={"groups": ["legal"]}, headers=as_["admin"]).status_code == 200
        for role in ("viewer", "editor"):
            assert client.get("/audit", headers=as_[role]).status_code == 403
        entries = client.get("/audit", headers=as_["auditor"]).json()
        actions = [e["action"] for e in entries]
        assert actions.count("key.created") == 4 and "configuration.created" in actions and "groups.set" in actions
        saved = next(e for e in entries if e["action"] == "configuration.created")
        assert saved["face"] == "rest" and saved["who"]["role"] == "editor"
        assert next(e for e in entries if e["action"] == "groups.set")["detail"] == {"before": [], "after": ["legal"]}
        assert client.get("/audit/verify", headers=as_["auditor"]).json()["ok"] is True
        csv = client.get("/audit?format=csv", headers=as_["admin"])
        assert csv.status_code == 200 and csv.text.startswith("seq,at,action")
        assert client.get(f"{BASE}/descriptors", headers=as_["auditor"]).status_code == 403  # the record and nothing else


def test_a_record_that_cannot_be_written_refuses_the_retrieval_unless_told_open(tmp_path, monkeypatch):
    with Runtime(tmp_path / "data") as runtime:
        kb = make_kb(runtime, "kb", minScore=0)
        runtime.ingest(kb, "a.md", "Trains leave at nine.")
        with runtime.db.transaction() as c:
            c.execute("DROP TABLE audit_entries")
        from eddi_rag.records.audit import AuditWriteError

        with pytest.raises(AuditWriteError, match="could not be written"):
            runtime.search.hits(SearchRequest(kb, "trains"))
        monkeypatch.setenv("EDDI_RAG_AUDIT_FAIL", "open")
        assert runtime.search.hits(SearchRequest(kb, "trains"))  # served, and logged


def test_mcp_the_hook_langgraph_and_the_manager_each_leave_their_entry(tmp_path):
    import anyio

    from eddi_rag.interop.langgraph import rag_runnable
    from eddi_rag.interop.mcp import build_server
    from tests.test_langgraph import agent
    from tests.test_mcp import Client, seed

    with Runtime(tmp_path / "data") as runtime:
        kb = seed(runtime)

        async def run():
            async with Client(build_server(runtime)) as client:
                return await client.call_tool("search_knowledge_base", {"knowledge_base_id": "Trains", "query": "night train"})

        assert not anyio.run(run).is_error
        (mcp,) = retrievals(runtime, face="mcp")
        assert mcp["subject"] == kb and mcp["detail"]["query"] == "night train"

        bot = agent(runtime)
        turn = runtime.turns.turn(bot, "When does the night train leave?", user_id="ann")
        (hook,) = retrievals(runtime, face="hook")
        assert hook["detail"]["agent"] == bot and hook["detail"]["task"] == "answer" and hook["detail"]["reader"] == "ann"
        (trace,) = next(v for k, v in turn["memory"].items() if k.startswith("rag:trace:"))
        assert trace["auditEntry"] == hook["seq"]  # the turn's trace names its entry
        rag_runnable(runtime.turns, bot).invoke({"messages": [("user", "Do dogs travel free?")]})
        assert len(retrievals(runtime, face="langgraph")) == 1

        with TestClient(create_app(runtime)) as client:  # Try it: the Manager's page asks REST
            asked = client.post(f"{BASE}/{kb}/query", json={"query": "dining car"}, headers={"Referer": f"http://t/ui/kbs/{kb}/try"})
            assert asked.status_code == 200
        assert retrievals(runtime, face="manager")[0]["detail"]["query"] == "dining car"
        assert runtime.audit.verify()["ok"]


def test_retrieval_spans_follow_the_genai_conventions_and_carry_documents_only_when_asked(tmp_path, monkeypatch):
    """Issue 59, point 6: a span per retrieval as the GenAI semantic conventions name it, received here by the SDK's
    in-memory exporter; document ids and scores only with the content opt-in."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from eddi_rag.common import telemetry

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.use(provider)
    try:
        with Runtime(tmp_path / "data") as runtime:
            kb = make_kb(runtime, "Rail", minScore=0)
            runtime.ingest(kb, "rail.md", "The night train leaves at 22:10.")
            runtime.search.hits(SearchRequest(kb, "night train", k=3))
            (span,) = exporter.get_finished_spans()
            assert span.name == "retrieval" and span.kind.name == "INTERNAL"
            assert {k: span.attributes[k] for k in ("gen_ai.operation.name", "gen_ai.data_source.id", "gen_ai.retrieval.top_k")} == \
                {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": kb, "gen_ai.retrieval.top_k": 3}
            assert "gen_ai.retrieval.documents" not in span.attributes
            monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")
            runtime.search.hits(SearchRequest(kb, "night train", k=3))
            documents = json.loads(exporter.get_finished_spans()[-1].attributes["gen_ai.retrieval.documents"])
            assert documents and set(documents[0]) == {"id", "score"}
    finally:
        telemetry.reset()


@pytest.mark.integration
def test_without_an_otlp_endpoint_nothing_of_opentelemetry_is_imported(tmp_path):
    import subprocess
    import sys

    script = ("import sys, pathlib; from eddi_rag.runtime import Runtime; from eddi_rag.verbs.search import SearchRequest\n"
              "from tests.support.kbs import make_kb\n"
              f"rt = Runtime(pathlib.Path({str(tmp_path)!r}) / 'data'); kb = make_kb(rt, 'k', minScore=0)\n"
              "rt.ingest(kb, 'a.md', 'Trains leave at nine.'); rt.search.hits(SearchRequest(kb, 'trains')); rt.close()\n"
              "print(sorted(m for m in sys.modules if m.startswith('opentelemetry')))")
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("OTEL_")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120,
                         cwd=str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_acl_changes_permission_syncs_vault_source_runs_and_deletes_are_entries(tmp_path, monkeypatch):
    """Issue 59, point 2: which documents' readers changed (old and new principals), a secret stored or granted (never
    its value), a source run started and purged, a document deleted."""
    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "the audit test's vault key")
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# A\n\nAlpha.\n")
    with Runtime(tmp_path / "data") as runtime:
        kb = make_kb(runtime, "kb", minScore=0, audience="DOCUMENT_ACL",
                     sources=[{"name": "Docs", "folder": {"path": str(tmp_path / "docs")}}])
        runtime.ingest(kb, "b.md", "Beta.", acl=["group:hr"])
        runtime.documents.set_acl(kb, "b.md", ["group:finance", "deny:user:dan"])
        runtime.vault.store("default", "api-key", "sk-never-in-the-record", "a key")
        runtime.sources.run(kb, "docs")
        runtime.sources.purge(kb, "docs")
        runtime.documents.delete(kb, "b.md")
        entries = runtime.audit.entries("default", limit=1000)
        by = {e["action"]: e for e in entries}
        assert by["acl.changed"]["detail"]["documents"] == [{"document": "b.md", "before": ["group:hr"],
                                                             "after": ["group:finance", "deny:user:dan"]}]
        assert by["vault.stored"]["subject"] == "secret api-key" and "sk-never" not in json.dumps(entries)
        assert by["source.run"]["detail"]["source"] == "docs" and by["source.purged"]["detail"] == {"source": "docs"}
        assert by["document.deleted"]["detail"]["document"] == "b.md"
        assert runtime.audit.verify()["ok"]


def test_a_users_queries_are_erased_and_old_entries_pruned_with_the_chain_still_verifiable(state_url, tmp_path):
    """Issue 59, point 5: erasing one user's query texts (GDPR Art. 17) and pruning expired entries leave a chain that
    verifies; an erased query is gone from what is read, its chained digest says nothing without its salt."""
    with Runtime(tmp_path / "data", state_url=state_url) as runtime:
        kb = make_kb(runtime, "kb", minScore=0)
        runtime.ingest(kb, "a.md", "Trains leave at nine.")
        runtime.search.hits(SearchRequest(kb, "when do trains leave for ann", reader=Reader("ann")))
        runtime.search.hits(SearchRequest(kb, "trains for bob", reader=Reader("bob")))
        assert runtime.audit.erase("default", "ann") == 1
        (ann,) = retrievals(runtime, user="ann")
        assert ann["detail"]["query"] is None and ann["detail"]["queryErasedOn"]
        with runtime.db.transaction() as c:
            stored = c.execute("SELECT detail, erasable FROM audit_entries WHERE seq=?", (ann["seq"],)).fetchone()
        assert "when do trains" not in json.dumps(list(stored)) and "Salt" not in (stored[1] or "")
        assert retrievals(runtime, user="bob")[0]["detail"]["query"] == "trains for bob"
        assert runtime.audit.verify()["ok"]

        total = runtime.audit.verify()["entries"]
        assert runtime.audit.prune(0) == total  # everything written before now
        assert runtime.audit.entries("default", limit=10)[0]["action"] == "audit.pruned"
        runtime.search.hits(SearchRequest(kb, "trains again"))
        found = runtime.audit.verify()
        assert found["ok"] and found["entries"] == 2, found  # the checkpoint, then the pruning's entry and the search
