"""Who may read what (docs/permissions.md): a knowledge base's audience and its documents' ACLs, enforced inside each
store's query on every backend the tests serve, failing closed (no verified user, no ACL, an error resolving groups),
an ACL changed without embedding again, and the reference meaning checked against random ACLs and principals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddi_rag.common.principals import InvalidAclError, Reader, parse_acl
from eddi_rag.config import ConfigValidationError
from eddi_rag.resource_types import ResourceNotFoundError, resource_uri
from eddi_rag.retrieval.access import WithheldError, access, readable_by
from eddi_rag.stores import filters
from eddi_rag.verbs.search import SearchRequest
from eddi_rag.workflow.memory import ConversationMemory
from tests.support.kbs import make_kb
from tests.support.marks import engines

SERVED = {"pgvector": "pgvector_params", "typesense": "typesense_params", "chroma": "chroma_params",
          "elasticsearch": "elasticsearch_params"}
DOCS = {  # document: (text, acl)
    "budget.md": ("The finance budget for Q3 is 4.2 million euros, approved by the board.", ["group:finance"]),
    "salaries.md": ("The finance salary bands for 2027 rise by three percent.", ["group:finance", "deny:user:carol"]),
    "handbook.md": ("The staff handbook: the finance office is on the second floor.", ["public"]),
    "unlabelled.md": ("A finance memo nobody gave readers to.", None),
}
GROUPS = {"alice": ["finance"], "carol": ["finance"], "bob": ["sales"]}


@pytest.fixture(params=engines("in-memory", "sqlite", "sqlite-vec", "qdrant", "pgvector", "chroma", "typesense",
                               "elasticsearch", served=tuple(SERVED)))
def acl_kb(request):
    """A DOCUMENT_ACL knowledge base on the backend under test holding DOCS, and the runtime; GROUPS in its directory."""
    params = request.getfixturevalue(SERVED[request.param]) if request.param in SERVED else {}
    if request.param == "qdrant":
        params = {"path": ":memory:"}
    runtime = request.getfixturevalue("runtime")
    mode = "vector" if request.param == "chroma" else "hybrid"
    kb = make_kb(runtime, "people", storeType=request.param, storeParameters=params, minScore=0, maxResults=10,
                 searchMode=mode, audience="DOCUMENT_ACL")
    for doc, (text, acl) in DOCS.items():
        runtime.ingest(kb, doc, text, acl=acl)
    for user, groups in GROUPS.items():
        runtime.groups.set("default", user, groups)
    return runtime, kb


def read(runtime, kb, user, query="finance budget and salaries") -> list[str]:
    return sorted({h.metadata["source"] for h in runtime.search.hits(SearchRequest(kb, query, user_id=user))})


def test_each_reader_gets_what_their_groups_may_read_inside_the_store(acl_kb):
    runtime, kb = acl_kb
    assert read(runtime, kb, "alice") == ["budget.md", "handbook.md", "salaries.md"]
    assert read(runtime, kb, "carol") == ["budget.md", "handbook.md"]  # denied by name
    assert read(runtime, kb, "bob") == ["handbook.md"]
    assert read(runtime, kb, "mallory") == ["handbook.md"]  # a verified user in no group: public only
    with pytest.raises(WithheldError, match="no verified user"):
        read(runtime, kb, None)
    passages = runtime.search.run(SearchRequest(kb, "finance", user_id="bob", expansion="neighbors")).passages
    assert {c.metadata["source"] for p in passages for c in [*p.hits, *p.chunks]} == {"handbook.md"}  # nothing joins


def test_an_acl_changed_by_patch_is_honoured_by_the_next_search_without_embedding(acl_kb):
    runtime, kb = acl_kb
    assert "budget.md" in read(runtime, kb, "alice")
    store = runtime.stores.get(kb, runtime.knowledge_bases.get(kb))
    before = {c.id: list(c.vector) for c in store.get({"document_id": "budget.md"})}
    done = runtime.documents.set_acl(kb, "budget.md", ["group:hr"])
    assert done["acl"] == ["group:hr"] and done["chunks"] == len(before)
    assert "budget.md" not in read(runtime, kb, "alice")
    assert {c.id: list(c.vector) for c in store.get({"document_id": "budget.md"})} == before  # the same vectors
    runtime.groups.add("default", "bob", ["hr"])
    assert read(runtime, kb, "bob") == ["budget.md", "handbook.md"]  # the directory, read at the next search


def test_a_turn_with_no_verified_user_is_withheld_and_the_model_told(acl_kb):
    runtime, kb = acl_kb
    agent = runtime.resources.create("agents", {"workflows": [runtime.resources.create("workflows", {"workflowSteps": [
        {"type": "eddi://ai.labs.rag", "config": {"uri": resource_uri("rags", kb, 1)}}]}).uri]}).id
    task = {"id": "answer", "enableWorkflowRag": True}
    scheduled = ConversationMemory(agent, user_input="What is the finance budget?")  # a scheduled turn: no user
    turn = runtime.llm_task.execute(scheduled, task, None)
    trace = scheduled.get("rag:trace:answer")
    assert trace == [{"kb": "people", "kbId": kb, "withheld": trace[0]["withheld"]}] and "no verified user" in trace[0]["withheld"]
    assert "## Retrieval Withheld:" in turn.system_message and "## Relevant Context:" not in turn.system_message
    assert scheduled.get("rag:context:answer") is None
    alice = ConversationMemory(agent, user_input="What is the finance budget?", user_id="alice")
    turn = runtime.llm_task.execute(alice, task, None)
    assert "4.2 million" in turn.system_message and "Withheld" not in turn.system_message
    bob = ConversationMemory(agent, user_input="What is the finance budget?", user_id="bob")
    turn = runtime.llm_task.execute(bob, task, None)
    assert "4.2 million" not in turn.system_message and "salary" not in turn.system_message
    assert {c["source"] for c in bob.get("rag:trace:answer")[0]["chunks"]} <= {"handbook.md"}


# --- in process: the rules themselves ---------------------------------------------------------------------------

def test_owner_reads_alone_and_an_error_resolving_groups_withholds(runtime):
    kb = make_kb(runtime, "mine", minScore=0, audience="OWNER", owner="user:alice")
    runtime.ingest(kb, "notes.md", "My private travel notes about Vienna.")
    assert [h.metadata["source"] for h in runtime.query(kb, "Vienna", user_id="alice")] == ["notes.md"]
    for stranger in ("bob", None):
        with pytest.raises(WithheldError):
            runtime.query(kb, "Vienna", user_id=stranger)

    def broken(tenant, user):
        raise OSError("the directory is down")

    acl = make_kb(runtime, "acl", minScore=0, audience="DOCUMENT_ACL")
    runtime.ingest(acl, "open.md", "Vienna is open to all.", acl=["public"])
    runtime.search.groups = broken
    with pytest.raises(WithheldError, match="groups could not be resolved"):
        runtime.query(acl, "Vienna", user_id="alice")
    with pytest.raises(WithheldError, match="groups could not be resolved"):  # a key bound to alice reads with the
        runtime.search.hits(SearchRequest(acl, "Vienna", reader=Reader("alice", ())))  # directory's groups too (a
    # deny:group: rule may name one of them): without the directory, nothing (issue 58, finding 7)


def test_warn_mode_reads_everything_and_counts_what_enforcing_would_withhold(runtime):
    from eddi_rag.retrieval.access import WITHHELD

    kb = make_kb(runtime, "warned", minScore=0, audience="DOCUMENT_ACL", aclMode="warn")
    runtime.ingest(kb, "open.md", "Vienna trains leave hourly.", acl=["public"])
    runtime.ingest(kb, "closed.md", "Vienna budget for trains.", acl=["group:finance"])
    before = WITHHELD.labels("warn")._value.get()
    hits = runtime.search.hits(SearchRequest(kb, "Vienna trains", user_id="bob"))
    assert sorted(h.metadata["source"] for h in hits) == ["closed.md", "open.md"]
    assert [h.id for h in hits if h.metadata["source"] == "closed.md"] == hits.would_withhold
    assert WITHHELD.labels("warn")._value.get() == before + 1
    assert len(runtime.search.hits(SearchRequest(kb, "Vienna trains"))) == 2  # no user: read, all counted


def test_saving_keeps_who_may_read_and_refuses_what_cannot_hold(runtime):
    with pytest.raises(ConfigValidationError, match=r"\$\.owner: audience OWNER needs an owner"):
        make_kb(runtime, "x", audience="OWNER")
    with pytest.raises(ConfigValidationError, match=r"\$\.audience: DOCUMENT_ACL needs the store to filter"):
        make_kb(runtime, "x", storeType="pgvector", storeParameters={"url": "postgresql://localhost/x", "table": "t"},
                audience="DOCUMENT_ACL")
    with pytest.raises(ConfigValidationError, match=r"audience"):
        make_kb(runtime, "x", audience="EVERYONE")
    kb = make_kb(runtime, "kept", audience="DOCUMENT_ACL", aclMode="warn")
    runtime.saving.update("rags", kb, 1, {"name": "kept", "embeddingProvider": "local", "storeType": "sqlite"})  # EDDI's body
    config = runtime.knowledge_bases.get(kb)
    assert (config.audience, config.aclMode) == ("DOCUMENT_ACL", "warn")  # never opened to everyone by leaving it out



def test_switching_to_document_acl_says_at_the_save_how_many_documents_nobody_reads(runtime):
    """Issue 58, finding 9: switching a knowledge base to DOCUMENT_ACL hid every document without readers silently."""
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app

    kb = make_kb(runtime, "switched", minScore=0)
    runtime.ingest(kb, "open.md", "Opening hours are nine to five.", acl=["public"])
    runtime.ingest(kb, "loose.md", "The loose document has no readers.")
    with TestClient(create_app(runtime)) as client:
        current = client.get(f"/ragstore/rags/{kb}").json()
        saved = client.put(f"/ragstore/rags/{kb}?version=1", json={**current, "audience": "DOCUMENT_ACL"})
        assert saved.status_code == 200, saved.text
        (said,) = [w for w in saved.json()["warnings"] if w["check"] == "acl"]
        assert "1 document(s) have no reader: loose.md" in said["detail"] and "nobody reads them now" in said["detail"]
        assert "settings.acl" in said["fix"] and "PATCH" in said["fix"]
        again = client.put(f"/ragstore/rags/{kb}?version=2", json={**current, "audience": "AGENT_USERS"})
        assert [w for w in again.json()["warnings"] if w["check"] == "acl"] == []

def test_an_acl_is_a_list_of_principals_and_a_bad_one_names_its_entry(runtime):
    assert parse_acl("group:finance, user:bob,deny:user:carol,group:finance") == ["group:finance", "user:bob", "deny:user:carol"]
    for wrong, where in (("finance", r"acl\[0\]"), (["public", "role:x"], r"acl\[1\]"), (["deny:deny:user:x"], r"acl\[0\]"),
                         (3, "acl: an ACL is a list")):
        with pytest.raises(InvalidAclError, match=where):
            parse_acl(wrong)
    kb = make_kb(runtime, "acl", audience="DOCUMENT_ACL")
    with pytest.raises(ValueError, match=r"document 'a.md': acl\[0\]"):
        runtime.ingest(kb, "a.md", "text", acl=["finance"])
    assert runtime.documents.list(kb)["documents"] == []  # nothing half-written


def test_a_document_ingested_again_without_an_acl_keeps_it(runtime):
    kb = make_kb(runtime, "again", audience="DOCUMENT_ACL", minScore=0)
    runtime.ingest(kb, "a.md", "Vienna version one.", acl=["group:finance"])
    runtime.ingest(kb, "a.md", "Vienna version two.")
    assert runtime.documents.list(kb)["documents"][0]["acl"] == ["group:finance"]
    runtime.ingest(kb, "a.md", "Vienna version three.", acl=[])
    assert "acl" not in runtime.documents.list(kb)["documents"][0] or runtime.documents.list(kb)["documents"][0]["acl"] == []


# --- the reference meaning, against random ACLs and principal sets ------------------------------------------------

_principal = st.sampled_from(["public", "link:organization", "user:alice", "user:bob", "group:finance", "group:hr",
                              "email:a@example.org"])
_acl = st.one_of(st.none(), st.lists(st.one_of(_principal, _principal.map(lambda p: "deny:" + p)), max_size=5))


def _meaning(acl: list[str] | None, held: set[str]) -> bool:
    """What an ACL means, said once more in plain Python: a grant held and no deny of a held principal."""
    if acl is None:
        return False
    grants = {p for p in acl if not p.startswith("deny:")}
    denies = {p[5:] for p in acl if p.startswith("deny:")}
    return bool(grants & held) and not denies & held


@settings(max_examples=150, deadline=None)
@given(acl=_acl, user=st.sampled_from(["alice", "bob", "zed"]), groups=st.lists(st.sampled_from(["finance", "hr", "x"]), max_size=2),
       email=st.sampled_from([None, "a@example.org"]))
def test_random_acls_and_principals_mean_what_the_reference_says(acl, user, groups, email):
    reader = Reader(user, tuple(groups), email)
    node = access("kb", "DOCUMENT_ACL", "enforce", None, reader, lambda u: ()).node
    meta = {} if acl is None else {"acl": acl}
    assert node == readable_by(reader.principals())
    assert filters.matches(node, meta) == _meaning(acl, set(reader.principals()))


@settings(max_examples=40, deadline=None)
@given(acls=st.lists(_acl, min_size=1, max_size=8), user=st.sampled_from(["alice", "bob"]),
       groups=st.lists(st.sampled_from(["finance", "hr"]), max_size=2))
def test_random_acls_through_the_embedded_store_match_the_reference(acls, user, groups):
    from eddi_rag.stores.base import Chunk, StoreContext
    from eddi_rag.stores.embedded.memory import InMemoryStore

    store = InMemoryStore("kb", {}, StoreContext())
    store.upsert([Chunk(f"c{i}", "t", {} if acl is None else {"acl": acl}, [1.0, float(i)]) for i, acl in enumerate(acls)])
    held = Reader(user, tuple(groups)).principals()
    expected = sorted(f"c{i}" for i, acl in enumerate(acls) if _meaning(acl, set(held)))
    assert sorted(c.id for c in store.get(readable_by(held))) == expected
    assert sorted(h.id for h in store.search([1.0, 0.0], 100, readable_by(held))) == expected


# --- every face, as bob ------------------------------------------------------------------------------------------

SECRET = "4.2 million"


@pytest.mark.integration
def test_every_face_as_bob_finds_no_trace_of_alices_finance_chunks(tmp_path):
    """REST, MCP, the CLI, Python, LangChain, the hook and the Manager, as bob (group sales): nothing of the finance
    documents, their chunk ids or their counts; alice (group finance) reads them through the same doors."""
    import anyio
    from click.testing import CliRunner
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.cli import main
    from eddi_rag.interop.langchain import KnowledgeBaseSearchRetriever
    from eddi_rag.runtime import Runtime
    from tests.support.browser import serving
    from tests.test_mcp import http_client, payload

    runtime = Runtime(tmp_path)
    kb = make_kb(runtime, "people", audience="DOCUMENT_ACL", minScore=0, maxResults=5)
    runtime.ingest(kb, "budget.md", f"The finance budget for Q3 is {SECRET} euros, approved by the board.", acl=["group:finance"])
    runtime.ingest(kb, "handbook.md", "The staff handbook: the finance office is on the second floor.", acl=["public"])
    runtime.groups.set("default", "bob", ["sales"])
    runtime.groups.set("default", "alice", ["finance"])
    hidden = [c.id for c in runtime.stores.get(kb, runtime.knowledge_bases.get(kb)).get({"document_id": "budget.md"})]
    runtime.feedback.record("default", kb, "what is the budget?", hidden[0], "up", "budget.md", "budget.md", None, "alice")
    _, bob = runtime.keys.create("default", "viewer", user="bob", groups=["sales"])
    _, alice = runtime.keys.create("default", "viewer", user="alice", groups=["finance"])
    _, service = runtime.keys.create("default", "viewer", acts_for_users=True)
    llm = runtime.resources.create("llm", {"tasks": [{"id": "answer", "type": "openai", "enableWorkflowRag": True}]}).uri
    agent = runtime.resources.create("agents", {"workflows": [runtime.resources.create("workflows", {"workflowSteps": [
        {"type": "eddi://ai.labs.rag", "config": {"uri": resource_uri("rags", kb, 1)}},
        {"type": "eddi://ai.labs.llm", "config": {"uri": llm}}]}).uri]}).id

    def clean(text: str, where: str) -> None:
        assert SECRET not in text and "budget.md" not in text and not any(i in text for i in hidden), where

    client = TestClient(create_app(runtime))
    as_bob, as_service = {"Authorization": f"Bearer {bob}"}, {"Authorization": f"Bearer {service}"}
    base = f"/ragstore/rags/{kb}"
    ask = {"query": "finance budget"}
    for method, path, body in [("POST", "/query", ask), ("POST", "/retrieve", {**ask, "minRelevance": 0}),
                               ("POST", "/context", {**ask, "answer": True}), ("GET", "/documents", None),
                               ("GET", "/health", None), ("GET", "/verdict", None), ("GET", "/doctor", None)]:
        r = client.request(method, base + path, json=body, headers=as_bob)
        assert r.status_code == 200, (path, r.text)
        clean(r.text, path)
    assert client.get(f"{base}/health", headers=as_bob).json()["details"]["documents"] == 1  # its own count
    assert client.get(f"{base}/chunks", params={"documentId": "budget.md"}, headers=as_bob).status_code == 404
    vote = {"query": "budget", "chunkId": hidden[0], "vote": "down"}
    assert client.post(f"{base}/feedback", json=vote, headers=as_bob).status_code == 404
    for path in ("/ragstore/feedback", "/ragstore/feedback/export.csv", "/metrics"):
        clean(client.get(path, headers=as_bob).text, path)
    assert client.get(f"{base}/questions", headers=as_bob).status_code == 403
    turn = client.post(f"/agentstore/agents/{agent}/turn", json={"message": "What is the finance budget?", "userId": "bob"},
                       headers=as_service)
    clean(turn.text, "a REST turn for bob")
    for path in (f"/ui/kbs/{kb}/documents", f"/ui/kbs/{kb}/try", "/ui"):
        clean(client.get(path, headers=as_bob).text, path)
    # alice, through the same doors
    assert SECRET in client.post(f"{base}/query", json=ask, headers={"Authorization": f"Bearer {alice}"}).text
    assert SECRET in client.post(f"/agentstore/agents/{agent}/turn", json={"message": "finance budget?", "userId": "alice"},
                                 headers=as_service).text

    async def mcp(url: str, key: str) -> dict:
        async with http_client(url, key) as mcp_client:
            return payload(await mcp_client.call_tool("search_knowledge_base", {"knowledge_base_id": kb, "query": "finance budget"}))

    with serving(create_app(runtime)) as url:
        clean(str(anyio.run(mcp, url, bob)), "MCP")
        assert SECRET in str(anyio.run(mcp, url, alice))

    clean(str([h.to_json() for h in runtime.query(kb, "finance budget", user_id="bob")]), "Python")
    retriever = KnowledgeBaseSearchRetriever(search=runtime.search, kb_id=kb, user_id="bob")
    clean(str(retriever.invoke("finance budget")), "LangChain")
    assert SECRET in str(KnowledgeBaseSearchRetriever(search=runtime.search, kb_id=kb, user_id="alice").invoke("finance budget"))
    clean(str(runtime.turn(agent, "What is the finance budget?", user_id="bob")), "the hook")
    runtime.close()
    cli = CliRunner().invoke(main, ["query", kb, "finance budget", "--user", "bob", "--json", "--data-dir", str(tmp_path)])
    assert cli.exit_code == 0, cli.output
    clean(cli.output, "CLI")
    assert SECRET in CliRunner().invoke(main, ["query", kb, "finance budget", "--user", "alice", "--data-dir", str(tmp_path)]).output


@pytest.mark.integration
def test_a_sources_default_acl_reaches_each_document_and_a_change_rewrites_them_without_embedding(runtime, tmp_path,
                                                                                                   monkeypatch):
    docs = tmp_path / "docs"
    docs.mkdir()
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (docs / "budget.md").write_text("# Budget\n\nThe finance budget for Q3 is 4.2 million euros.\n")
    source = {"name": "Finance", "folder": {"path": str(docs)}, "settings": {"acl": ["group:finance"]}}
    kb = make_kb(runtime, "finance", minScore=0, audience="DOCUMENT_ACL", sources=[source])
    runtime.groups.set("default", "alice", ["finance"])
    assert runtime.sources.run(kb, "finance").added == 1
    assert read(runtime, kb, "alice", "budget") == ["budget.md"] and read(runtime, kb, "bob", "budget") == []
    runtime.saving.update("rags", kb, 1, {"name": "finance", "embeddingProvider": "local", "storeType": "sqlite",
                                          "minScore": 0, "sources": [{**source, "settings": {"acl": ["group:hr"]}}]})
    rerun = runtime.sources.run(kb, "finance")
    assert (rerun.updated, rerun.embedded) == (1, 0)  # the readers changed, the text did not: nothing embedded
    assert read(runtime, kb, "alice", "budget") == []
    with pytest.raises(ConfigValidationError, match=r"settings.*acl"):
        make_kb(runtime, "bad", sources=[{**source, "settings": {"acl": ["finance"]}}])


def test_a_knowledge_base_shared_with_named_users_and_groups_is_theirs_alone(tmp_path):
    """Per-resource access, as EDDI's sharing: VIEW reads it, EDIT also changes it, on top of tenant roles; a knowledge
    base with no grant is the tenant's; the tenant's administrators and the agent runtime's credential (VIEW) pass."""
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.runtime import Runtime

    runtime = Runtime(tmp_path)
    keys = {"admin": runtime.keys.create("default", "admin")[1],
            "alice": runtime.keys.create("default", "editor", user="alice", groups=["finance"])[1],
            "bob": runtime.keys.create("default", "editor", user="bob")[1],
            "carol": runtime.keys.create("default", "viewer", user="carol")[1],
            "service": runtime.keys.create("default", "viewer", acts_for_users=True)[1]}
    runtime.groups.set("default", "carol", ["auditors"])
    client = TestClient(create_app(runtime))

    def as_(who: str) -> dict:
        return {"Authorization": f"Bearer {keys[who]}"}

    kb = make_kb(runtime, "ledger", minScore=0)
    base = f"/ragstore/rags/{kb}"
    ask = {"query": "ledger"}
    assert client.post(f"{base}/query", json=ask, headers=as_("bob")).status_code == 200  # no grant: the tenant's
    shared = client.put(f"{base}/grants", headers=as_("admin"), json={"grants": [
        {"principal": "group:finance", "access": "EDIT"}, {"principal": "group:auditors", "access": "VIEW"}]})
    assert shared.status_code == 200 and shared.json()["grants"] == {"group:auditors": "VIEW", "group:finance": "EDIT"}
    assert client.put(f"{base}/grants", headers=as_("alice"), json={"grants": []}).status_code == 403  # admins share
    for who, query, ingest in (("alice", 200, 202), ("carol", 200, 403), ("bob", 403, 403), ("service", 200, 403)):
        assert client.post(f"{base}/query", json=ask, headers=as_(who)).status_code == query, who
        r = client.post(f"{base}/ingest", content=b"ledger entry", headers={**as_(who), "Content-Type": "text/plain"},
                        params={"documentName": "l.md"})
        assert r.status_code == ingest, (who, r.text)
    assert client.get(f"{base}", headers=as_("bob")).status_code == 403
    assert kb not in client.get("/ragstore/rags/descriptors", headers=as_("bob")).text
    assert kb in client.get("/ragstore/rags/descriptors", headers=as_("carol")).text
    assert "ledger" not in client.get("/ui", headers=as_("bob")).text
    with pytest.raises(ValueError, match=r"grants\[0\].principal"):
        runtime.grants.set("default", kb, [{"principal": "finance", "access": "VIEW"}])
    assert client.put(f"{base}/grants", headers=as_("admin"), json={"grants": []}).json()["grants"] == {}
    assert client.post(f"{base}/query", json=ask, headers=as_("bob")).status_code == 200  # the tenant's again
    runtime.grants.set("default", kb, [{"principal": "group:finance", "access": "VIEW"}])
    runtime.saving.delete("rags", kb, permanent=True)
    assert runtime.grants.of("default", kb) == {}  # deleted for good: its grants with it
    runtime.close()


def test_the_cli_fills_the_group_directory_and_binds_a_keys_groups(tmp_path):
    from click.testing import CliRunner

    from eddi_rag.cli import main

    data = ["--data-dir", str(tmp_path)]
    run = CliRunner().invoke
    assert "alice (default): finance, hr" in run(main, ["groups", "add", "--user", "alice", "--group", "hr", "--group", "finance", *data]).output
    assert "alice (default): finance" in run(main, ["groups", "remove", "--user", "alice", "--group", "hr", *data]).output
    assert "alice: finance" in run(main, ["groups", "list", *data]).output
    made = run(main, ["keys", "create", "--tenant", "default", "--role", "viewer", "--user", "alice", "--group", "finance", *data])
    assert "groups finance" in made.output
    refused = run(main, ["keys", "create", "--tenant", "default", "--role", "viewer", "--group", "finance", *data])
    assert refused.exit_code != 0 and "name the user too" in refused.output
    bad = run(main, ["ingest", "kb", str(tmp_path), "--acl", "finance", *data])
    assert bad.exit_code != 0 and "--acl[0]" in bad.output


def test_the_keyword_index_decides_who_may_read_inside_its_query_and_keeps_bm25(tmp_path):
    """The sqlite store's tantivy index holds each chunk's acl: a reader's grants and denies are part of tantivy's query
    (a reader of a tenth is not handed the other nine tenths first), and the BM25 of what passes is unchanged."""
    from eddi_rag.state.sqlite import Database
    from eddi_rag.stores.base import Chunk, StoreContext
    from eddi_rag.stores.embedded.sqlite import SqliteStore

    store = SqliteStore("kb", {}, StoreContext(Database(tmp_path / "s.db"), tmp_path))
    store.upsert([Chunk(f"c{i:03d}", f"vienna night train number {i}" + " vienna" * (i % 3), {"acl": [f"group:g{i % 10}"]},
                        [1.0, float(i)]) for i in range(200)])
    everyone = {h.id: h.bm25 for h in store.keyword_search("vienna train", 200)}
    reader = readable_by(Reader("alice", ("g0",)).principals())
    mine = store.keyword_search("vienna train", 5, where=reader)
    assert {h.id for h in mine} <= {i for i in everyone if int(i[1:]) % 10 == 0}
    assert sorted((h.bm25 for h in mine), reverse=True) == sorted((everyone[i] for i in everyone if int(i[1:]) % 10 == 0),
                                                                  reverse=True)[:5]
    assert all(h.bm25 == pytest.approx(everyone[h.id]) for h in mine) and len(mine) == 5
    searched = []
    index = store._cache.keywords
    original = index.search
    index.search = lambda *a, **kw: searched.append(a) or original(*a, **kw)
    store.keyword_search("vienna train", 5, where=reader)
    assert len(searched) == 1  # one round: tantivy was asked for the reader's chunks only


def test_an_engine_answering_beyond_the_acl_still_fails_closed(runtime, monkeypatch):
    """Found on Chroma once in a full run (a chunk with no ACL came back for bob): what an engine answers is checked
    again against the reader's ACL, its hits and the chunks around them, and the document pages' lists, so an engine's
    slip withholds, never leaks."""
    from eddi_rag.stores.embedded.memory import InMemoryStore

    kb = make_kb(runtime, "slips", storeType="in-memory", minScore=0, audience="DOCUMENT_ACL", contextExpansion="neighbors")
    runtime.ingest(kb, "open.md", "Vienna trains leave hourly.", acl=["public"])
    runtime.ingest(kb, "closed.md", "Vienna budget is secret.", acl=["group:finance"])
    runtime.ingest(kb, "none.md", "Vienna memo without readers.")
    search, get = InMemoryStore.search, InMemoryStore.get
    monkeypatch.setattr(InMemoryStore, "search", lambda self, vector, k, where=None: search(self, vector, k))  # ignores it
    monkeypatch.setattr(InMemoryStore, "get", lambda self, where=None, **kw: get(self, None, **kw))
    result = runtime.search.run(SearchRequest(kb, "Vienna", user_id="bob", mode="vector"))
    assert [h.metadata["source"] for h in result.hits] == ["open.md"]
    assert {c.metadata["source"] for p in result.passages for c in [*p.hits, *p.chunks]} == {"open.md"}
    bob = readable_by(Reader("bob", ()).principals())
    assert [d["documentId"] for d in runtime.documents.list(kb, readable=bob)["documents"]] == ["open.md"]
    monkeypatch.undo()
    opened, unlabelled = (runtime.documents.chunks(kb, doc)[0]["id"] for doc in ("open.md", "none.md"))
    monkeypatch.setattr(InMemoryStore, "get", lambda self, where=None, **kw: get(self, None, **kw))
    assert runtime.documents.visible(kb, opened, None, bob) and not runtime.documents.visible(kb, unlabelled, None, bob)
    with pytest.raises(ResourceNotFoundError):  # the Manager's and REST's document pages: the same re-check
        runtime.documents.chunks(kb, "none.md", readable=bob)


def test_a_copy_is_its_makers_and_needs_the_right_to_read_the_original(tmp_path):
    """Issue 67 (a review's leftover): REST's duplicate passed no caller, so a copy kept the original's owner (a
    non-administrator's copy of someone else's knowledge base was refused: "only an administrator names another
    owner"); the Manager's duplicate checked no grant and saved the copy as the original's, store place included (REST's gives a
    copy a store of its own)."""
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.resource_types import parse_uri
    from eddi_rag.runtime import Runtime

    def id_of(uri: str) -> str:
        return parse_uri(uri).id

    runtime = Runtime(tmp_path)
    keys = {"admin": runtime.keys.create("default", "admin")[1],
            "alice": runtime.keys.create("default", "editor", user="alice")[1],
            "dan": runtime.keys.create("default", "editor", user="dan")[1]}
    client = TestClient(create_app(runtime))
    kb = make_kb(runtime, "ledger", owner="user:bob")
    shared = client.put(f"/ragstore/rags/{kb}/grants", headers={"Authorization": f"Bearer {keys['admin']}"},
                        json={"grants": [{"principal": "user:alice", "access": "VIEW"}]})
    assert shared.status_code == 200, shared.text
    as_alice, as_dan = ({"Authorization": f"Bearer {keys[w]}"} for w in ("alice", "dan"))

    copied = client.post(f"/ragstore/rags/{kb}", headers=as_alice)
    assert copied.status_code == 201, copied.text
    copy = copied.headers["Location"].split("/")[-1].split("?")[0]
    assert runtime.catalog.read("rags", copy)["owner"] == "user:alice"
    assert client.post(f"/ragstore/rags/{kb}", headers=as_dan).status_code in (403, 404)

    page = client.post(f"/ui/kbs/{kb}/duplicate", headers=as_alice, follow_redirects=False)
    assert page.status_code == 303, page.text
    made = [d for d in runtime.knowledge_bases.every("default") if d.name == "ledger (copy)"]
    assert len(made) == 1 and runtime.catalog.read("rags", id_of(made[0].resource))["owner"] == "user:alice"
    refused = client.post(f"/ui/kbs/{kb}/duplicate", headers=as_dan, follow_redirects=False)
    assert refused.status_code in (403, 404) and len([d for d in runtime.knowledge_bases.every("default")
                                                        if d.name.startswith("ledger (copy")]) == 1
