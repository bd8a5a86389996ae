"""The audit record (issue 59): every face's retrieval leaves an entry naming who was shown which document versions
under which ACL; administrative actions too; the hash chain finds an edited, a removed and a moved entry, on SQLite and
PostgreSQL; the auditor role reads it and nothing else; a record that cannot be written refuses the retrieval."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.common.principals import Reader
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.search import SearchRequest
from tests.support.kbs import make_kb

BASE = "/ragstore/rags"


def retrievals(runtime: Runtime, **filters) -> list[dict]:
    return runtime.audit.entries("default", action="retrieval", **filters)


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
        from eddi_rag.answers.extractive import ExtractiveChatModel

        answered = runtime.turns.turn(bot, "When does the night train leave?", user_id="ann", chat_model=ExtractiveChatModel())
        assert "[Source 1" in answered["answer"], answered["answer"]
        (answer,) = runtime.audit.entries("default", action="answer")
        assert answer["face"] == "hook" and answer["subject"] == bot and answer["detail"]["retrievals"] == [retrievals(runtime, face="hook")[-1]["seq"]]
        assert answer["detail"]["citations"][0]["known"] and answer["detail"]["citations"][0]["document"]  # the citations it used
        rag_runnable(runtime.turns, bot).invoke({"messages": [("user", "Do dogs travel free?")]})
        assert len(retrievals(runtime, face="langgraph")) == 1

        with TestClient(create_app(runtime)) as client:  # Try it: the Manager's page asks REST
            asked = client.post(f"{BASE}/{kb}/query", json={"query": "dining car"}, headers={"Referer": f"http://t/ui/kbs/{kb}/try"})
            assert asked.status_code == 200
        assert retrievals(runtime, face="manager")[0]["detail"]["query"] == "dining car"
        assert runtime.audit.verify()["ok"]


def test_retrieval_spans_follow_the_genai_conventions_and_carry_documents_only_when_asked(tmp_path, monkeypatch):
    """Issue 59, point 6: a span per retrieval and per call of an embedding model as the GenAI semantic conventions name
    them, received here by the SDK's in-memory exporter; document ids and scores only with the content opt-in."""
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
            (embedded,) = exporter.get_finished_spans()  # the chunk's embedding (the local model, in this process)
            assert embedded.name.startswith("embeddings ") and embedded.kind.name == "INTERNAL"
            assert embedded.attributes["gen_ai.operation.name"] == "embeddings" and embedded.attributes["gen_ai.provider.name"] == "local"
            assert embedded.attributes["gen_ai.request.model"] and embedded.attributes["gen_ai.embeddings.dimension.count"] > 0
            runtime.search.hits(SearchRequest(kb, "night train", k=3))
            query, span = exporter.get_finished_spans()[1:]  # the query's embedding (a cache miss), then the retrieval
            assert query.name == embedded.name
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


def test_a_tenants_retention_empties_its_old_entries_and_the_chain_still_verifies(state_url, tmp_path):
    """Issue 59, point 5: ``auditRetentionDays`` per tenant, applied by the scheduler: the tenant's expired entries are
    emptied in place (what they said is gone, their links stay), the other tenants' entries after them still verify,
    leading emptied entries become a checkpoint; an entry emptied without a pruning that covers it is found."""
    from datetime import datetime, timedelta, timezone

    with Runtime(tmp_path / "data", state_url=state_url) as runtime, TestClient(create_app(runtime)) as client:
        kb = make_kb(runtime, "kb", minScore=0)
        runtime.ingest(kb, "a.md", "Trains leave at nine.")
        runtime.search.hits(SearchRequest(kb, "trains", reader=Reader("ann")))
        runtime.audit.record("acme", "test.kept", "thing/1", {"n": 1})
        runtime.search.hits(SearchRequest(kb, "trains again", reader=Reader("ann")))
        for wrong, field in (({"auditRetentionDays": 0}, "auditRetentionDays"), ({"auditQueries": "some"}, "auditQueries"),
                             ({"retention": 3}, "retention")):
            refused = client.put("/audit/settings", json=wrong)
            assert refused.status_code in (400, 422) and field in refused.text, refused.text
        assert client.get("/audit/settings").json() == {"auditRetentionDays": None, "auditQueries": None,
                                                        "effective": {"auditRetentionDays": 365.0, "auditQueries": "full"}}
        set_ = client.put("/audit/settings", json={"auditRetentionDays": 1, "auditQueries": "digest"})
        assert set_.status_code == 200 and set_.json()["effective"] == {"auditRetentionDays": 1, "auditQueries": "digest"}
        runtime.search.hits(SearchRequest(kb, "a digest of this", reader=Reader("ann")))
        assert retrievals(runtime)[-1]["detail"]["query"].startswith("sha256:")
        assert len(retrievals(runtime, document="a.md")) == 3

        runtime.scheduler.tick(datetime.now(timezone.utc) + timedelta(days=2))  # the scheduler's hourly retention
        assert [e["action"] for e in runtime.audit.entries("default")] == ["audit.pruned"]
        assert retrievals(runtime, document="a.md") == [] and retrievals(runtime, user="ann") == []
        assert [e["action"] for e in runtime.audit.entries("acme")] == ["test.kept"]  # its own 365 days
        found = runtime.audit.verify()
        assert found["ok"], found
        with runtime.db.transaction() as c:  # the default tenant's entries before acme's: a checkpoint now
            assert c.execute("SELECT COUNT(*) FROM audit_checkpoints").fetchone()[0] == 1
            emptied = c.execute("SELECT detail FROM audit_entries WHERE tenant='default' AND pruned IS NOT NULL").fetchall()
            assert emptied and {r[0] for r in emptied} == {"{}"}
            c.execute("UPDATE audit_entries SET detail='{}', pruned='now' WHERE tenant='acme'")
        acme = runtime.audit.verify()["problems"]
        assert [p["problem"] for p in acme] == ["it was emptied, but no pruning of its tenant covers it"]


def test_an_older_record_is_indexed_for_an_auditors_questions_when_migrated(state_url, tmp_path):
    """Schema 24 fills the columns and the document index an auditor's filters read from the entries written before."""
    with Runtime(tmp_path / "data", state_url=state_url) as runtime:
        kb = make_kb(runtime, "kb", minScore=0)
        runtime.ingest(kb, "a.md", "Trains leave at nine.")
        runtime.search.hits(SearchRequest(kb, "trains", reader=Reader("ann")))
        with runtime.db.transaction() as c:
            c.execute("UPDATE audit_entries SET who_user=NULL, reader=NULL")
            c.execute("DELETE FROM audit_documents")
            runtime.db.set_schema_version(c, 23)
    with Runtime(tmp_path / "data", state_url=state_url) as runtime:
        assert [e["detail"]["reader"] for e in retrievals(runtime, document="a.md")] == ["ann"]
        assert len(retrievals(runtime, user="ann")) == 1


KILLED = """
import os, pathlib, signal, sys
from contextlib import contextmanager
from eddi_rag.records import audit
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.search import SearchRequest
from tests.support.kbs import make_kb

data, url, when = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
runtime = Runtime(data, state_url=url)
kb = make_kb(runtime, "kb", minScore=0)
runtime.ingest(kb, "a.md", "Trains leave at nine.")
print("KB", kb, flush=True)
append = audit.AuditLog.append

def killed(self, tenant, action, *args, **kwargs):
    if action != "retrieval":
        return append(self, tenant, action, *args, **kwargs)
    if when == "written":  # the entry committed, the answer not yet returned
        append(self, tenant, action, *args, **kwargs)
        os.kill(os.getpid(), signal.SIGKILL)
    transaction = self.db.transaction

    @contextmanager
    def dying(**lock):  # the entry inserted, its transaction not yet committed
        with transaction(**lock) as c:
            class Dying:
                def __getattr__(self, name):
                    def call(sql, *a):
                        if sql.startswith("INSERT INTO audit_documents"):
                            os.kill(os.getpid(), signal.SIGKILL)
                        return getattr(c, name)(sql, *a)
                    return call
            yield Dying()
    if self.db.dialect == "postgresql":  # one statement appends: run in a transaction, the process dies before its commit
        with transaction():
            self.db.in_transaction = lambda: False
            append(self, tenant, action, *args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
    self.db.transaction = dying
    return append(self, tenant, action, *args, **kwargs)

audit.AuditLog.append = killed
print("ANSWER", runtime.search.hits(SearchRequest(kb, "trains"))[0].id, flush=True)
"""


@pytest.mark.integration
@pytest.mark.parametrize("when", ["written", "writing"])
def test_a_process_killed_between_the_entry_and_the_answer_served_nothing_the_record_lacks(state_url, tmp_path, when):
    """Issue 59, point 7: the guarantee, an answer that was served has its entry. A retrieval's entry is committed before
    its answer leaves, so a process killed (SIGKILL) after the entry is written served nothing the record lacks; killed
    while writing it, the transaction is rolled back: no entry, no answer, and the chain goes on unbroken."""
    import subprocess
    import sys
    from pathlib import Path

    out = subprocess.run([sys.executable, "-c", KILLED, str(tmp_path / "data"), state_url, when], capture_output=True, text=True,
                         timeout=120, cwd=str(Path(__file__).resolve().parents[1]))
    assert out.returncode == -9, out.stderr[-2000:]
    assert "ANSWER" not in out.stdout  # nothing was served
    with Runtime(tmp_path / "data", state_url=state_url) as runtime:
        assert len(retrievals(runtime)) == (1 if when == "written" else 0)
        kb = out.stdout.split()[1]
        runtime.search.hits(SearchRequest(kb, "trains"))  # the chain goes on after the kill
        found = runtime.audit.verify()
        assert found["ok"], found
        assert len(retrievals(runtime)) == (2 if when == "written" else 1)


@pytest.mark.browser
@pytest.mark.integration
def test_an_auditor_reads_filters_exports_and_verifies_the_record_in_the_manager(browser, server):
    """Issue 59, point 4: the Manager's audit page. An auditor signs in and lands on it (every other page sends them
    there): "what was user alice shown", "who was shown salaries.md", the export of what is shown, the chain verified and
    a tampered entry named; an administrator also sets what is kept and erases a user's queries."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from tests.support.browser import has_text, no_page_errors, screenshot, visible, wait

    url, runtime = server
    kb = make_kb(runtime, "Policies", minScore=0, audience="DOCUMENT_ACL")
    runtime.ingest(kb, "salaries.md", "Salary bands rise by three percent in March.", acl=["group:hr"])
    runtime.ingest(kb, "canteen.md", "Die Kantine öffnet um zwölf. 食堂中午开门。", acl=["public"])
    runtime.groups.set("default", "alice", ["hr"])
    runtime.search.hits(SearchRequest(kb, "salary bands", reader=Reader("alice")))
    runtime.search.hits(SearchRequest(kb, "Kantine 食堂", reader=Reader("bob")))
    _, auditor = runtime.keys.create("default", "auditor", name="the auditor")
    _, boss = runtime.keys.create("default", "admin", name="boss")

    browser.delete_all_cookies()
    browser.get(f"{url}/ui")
    visible(browser, "#credential").send_keys(auditor + "\n")
    wait(browser).until(lambda d: d.current_url.endswith("/ui/audit"))  # the record and nothing else
    assert [a.text for a in browser.find_elements(By.CSS_SELECTOR, "nav a")] == ["Audit"]
    assert not browser.find_elements(By.ID, "audit-settings")
    has_text(browser, "#audit-entries tbody", "salaries.md")
    form = browser.find_element(By.ID, "audit-filter")
    form.find_element(By.NAME, "user").send_keys("alice")
    Select(form.find_element(By.NAME, "action")).select_by_visible_text("retrieval")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#audit-entries tbody tr")) == 1)
    row = browser.find_element(By.CSS_SELECTOR, "#audit-entries tbody tr")
    assert "read as alice" in row.text and "salaries.md" in row.text and "salary bands" in row.text
    assert "user=alice" in browser.find_element(By.ID, "export-csv").get_attribute("href")
    form.find_element(By.NAME, "user").clear()
    form.find_element(By.NAME, "document").send_keys("canteen.md")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    has_text(browser, "#audit-entries tbody", "Kantine 食堂")  # who was shown it: bob
    assert "read as bob" in browser.find_element(By.CSS_SELECTOR, "#audit-entries tbody").text
    browser.find_element(By.ID, "verify").click()
    has_text(browser, "#verify-out", "the chain holds")
    screenshot(browser, "audit-1-auditor")
    with runtime.db.transaction() as c:
        c.execute("UPDATE audit_entries SET subject='other' WHERE action='retrieval' AND reader='bob'")
        tampered = c.execute("SELECT seq FROM audit_entries WHERE reader='bob'").fetchone()[0]
    browser.find_element(By.ID, "verify").click()
    has_text(browser, "#verify-out", f"entry {tampered}: its content does not match its hash (edited)")
    no_page_errors(browser)

    browser.delete_all_cookies()
    browser.get(f"{url}/ui/audit")
    visible(browser, "#credential").send_keys(boss + "\n")
    settings = visible(browser, "#audit-settings")
    settings.find_element(By.NAME, "auditRetentionDays").send_keys("30")
    Select(settings.find_element(By.NAME, "auditQueries")).select_by_value("digest")
    settings.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    has_text(browser, "#audit-settings-out", "kept 30 days, queries as a digest")
    erase = browser.find_element(By.ID, "audit-erase")
    erase.find_element(By.NAME, "user").send_keys("alice")
    erase.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    browser.switch_to.alert.accept()
    has_text(browser, "#audit-erase-out", "Erased 1 query of alice")
    assert runtime.audit.settings("default")["effective"] == {"auditRetentionDays": 30, "auditQueries": "digest"}
    no_page_errors(browser)


def test_appends_from_many_threads_keep_one_chain_and_never_wait_on_a_write(state_url, tmp_path):
    """Appends at once (each thread its own connection on PostgreSQL) make one chain in order; on PostgreSQL an append
    takes the chain's own lock, so a retrieval's entry is written while another transaction holds the write lock."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    with Runtime(tmp_path / "data", state_url=state_url) as runtime:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda i: runtime.audit.record("default", "test.action", f"thing/{i}", {"n": i}), range(60)))
        found = runtime.audit.verify()
        assert found == {"ok": True, "entries": 60, "problems": []}
        if runtime.db.dialect != "postgresql":
            return
        holding, done = threading.Event(), threading.Event()

        def ingesting():
            with runtime.db.transaction():
                holding.set()
                done.wait(30)

        writer = threading.Thread(target=ingesting)
        writer.start()
        try:
            holding.wait(10)
            runtime.audit.record("default", "test.action", "while/writing", {})
            assert writer.is_alive()  # written while the write lock is held (waiting, it would follow the writer's end)
        finally:
            done.set()
            writer.join()
        assert runtime.audit.verify()["ok"]
