"""Each verb through each face it is offered on: the same result, and the same refusal for the same
bad input. Faces: the Python API (``Runtime`` and its verbs), REST, MCP, the CLI, the Manager UI,
LangGraph, the EDDI import. The rules live once, in ``eddi_rag.verbs``."""

from __future__ import annotations

import json

import anyio
import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient
from mcp import Client

from eddi_rag.api.app import create_app
from eddi_rag.cli import main
from eddi_rag.common.quoting import unquoted
from eddi_rag.errors import EddiRagError
from eddi_rag.interop.mcp import build_server
from eddi_rag.resource_types import parse_uri
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.search import SearchRequest
from tests.support.waiting import until
from tests.test_eddi_import import export_zip

DOCS = {"rail.md": "The night train to Vienna leaves at 22:10 from platform 4.",
        "menu.md": "The dining car serves goulash and apple strudel until 21:00.",
        "pets.md": "Dogs travel free on night trains when kept on a leash."}
KB = {"name": "Trains", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0, "searchMode": "vector"}
BAD_KB = {"name": "Broken", "embeddingProvider": "local", "storeType": "nope"}
QUESTION = "When does the night train leave?"


@pytest.fixture(scope="module")
def faces(tmp_path_factory):
    data = tmp_path_factory.mktemp("parity")
    runtime = Runtime(data)
    kb = runtime.saving.create("rags", KB).id
    for name, text in DOCS.items():
        runtime.ingesting.text(kb, name, text)
    with TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        yield runtime, client, kb, data
    runtime.close()


def mcp(runtime: Runtime, tool: str, args: dict):
    async def run():
        async with Client(build_server(runtime)) as client:
            return await client.call_tool(tool, args)
    return anyio.run(run)


def mcp_payload(result) -> dict:
    assert not result.is_error, result.content
    return result.structured_content if result.structured_content is not None else json.loads(result.content[0].text)


def cli(data, *args: str):
    return CliRunner().invoke(main, [*args, "--data-dir", str(data)])


# -- searching ----------------------------------------------------------------------------------

def test_search_gives_the_same_chunks_on_every_face(faces):
    runtime, client, kb, data = faces
    library = [h.id for h in runtime.query(kb, QUESTION, max_results=3)]
    verb = [h.id for h in runtime.search.hits(SearchRequest(kb, QUESTION, k=3))]
    rest = [r["id"] for r in client.post(f"/ragstore/rags/{kb}/query", json={"query": QUESTION, "maxResults": 3}).json()["results"]]
    retrieve = [c["id"] for c in client.post(f"/ragstore/rags/{kb}/retrieve",
                                             json={"query": QUESTION, "maxChunks": 3, "minRelevance": 0}).json()["chunks"]]
    tool = [r["id"] for r in mcp_payload(mcp(runtime, "search_knowledge_base", {"knowledge_base_id": kb, "query": QUESTION, "k": 3}))["results"]]
    printed = cli(data, "query", kb, QUESTION, "-k", "3", "--json")
    assert printed.exit_code == 0, printed.output
    command = [h["id"] for h in json.loads(printed.output)]
    assert len(library) == 3 and library == verb == rest == retrieve == tool == command
    assert runtime.search.hits(SearchRequest(kb, QUESTION, k=3))[0].metadata["source"] == "rail.md"


def test_search_refuses_an_unknown_knowledge_base_on_every_face(faces):
    runtime, client, _, data = faces
    with pytest.raises(EddiRagError) as library:
        runtime.query("nope", QUESTION)
    assert library.value.status == 404
    assert client.post("/ragstore/rags/nope/query", json={"query": QUESTION}).status_code == 404
    assert client.post("/ragstore/rags/nope/retrieve", json={"query": QUESTION}).status_code == 404
    tool = mcp(runtime, "search_knowledge_base", {"knowledge_base_id": "nope", "query": QUESTION})
    assert tool.is_error and "no knowledge base 'nope'" in tool.content[0].text
    printed = cli(data, "query", "nope", QUESTION)
    assert printed.exit_code == 1 and "not found" in printed.output


def test_search_refuses_a_bad_filter_with_the_same_message_on_every_face(faces):
    runtime, client, kb, data = faces
    where = {"source": {"$near": "x"}}
    with pytest.raises(EddiRagError) as library:
        runtime.search.hits(SearchRequest(kb, QUESTION, where=where))
    message = str(library.value)
    assert library.value.status == 400 and "$near" in message
    rest = client.post(f"/ragstore/rags/{kb}/query", json={"query": QUESTION, "where": where})
    assert (rest.status_code, rest.json()["error"]) == (400, message)
    retrieve = client.post(f"/ragstore/rags/{kb}/retrieve", json={"query": QUESTION, "where": where})
    assert (retrieve.status_code, retrieve.json()["error"]) == (400, message)
    tool = mcp(runtime, "search_knowledge_base", {"knowledge_base_id": kb, "query": QUESTION, "where": where})
    assert tool.is_error and json.loads(tool.content[0].text) == {"error": message, "errorCode": "BAD_REQUEST"}
    printed = cli(data, "query", kb, QUESTION, "--where", json.dumps(where))
    assert printed.exit_code == 1 and message in printed.output
    not_json = cli(data, "query", kb, QUESTION, "--where", "{source: x}")
    assert not_json.exit_code == 2 and "--where" in not_json.output and "Traceback" not in not_json.output


def test_search_refuses_a_blank_query_on_every_face(faces):
    runtime, client, kb, data = faces
    with pytest.raises(EddiRagError, match="query is empty"):
        runtime.query(kb, "   ")
    assert client.post(f"/ragstore/rags/{kb}/query", json={"query": "   "}).status_code in (400, 422)
    assert client.post(f"/ragstore/rags/{kb}/retrieve", json={"query": "   "}).status_code in (400, 422)
    assert mcp(runtime, "search_knowledge_base", {"knowledge_base_id": kb, "query": "   "}).is_error
    assert cli(data, "query", kb, "   ").exit_code == 1


def test_the_llm_task_context_is_the_turns_verb(faces):
    runtime, client, kb, _ = faces
    verb = runtime.turns.context(kb, QUESTION)
    rest = client.post(f"/ragstore/rags/{kb}/context", json={"query": QUESTION}).json()
    assert rest["section"] == verb["section"] and "22:10" in verb["section"]


# -- ingesting, documents ------------------------------------------------------------------------

def test_ingesting_a_text_makes_the_same_chunks_on_every_face(faces, tmp_path):
    runtime, client, kb, data = faces
    text = "Bicycles travel on night trains in the bike carriage, booked ahead."
    counts = {"library": runtime.ingest(kb, "bikes-1.md", text)}
    counts["verb"] = runtime.ingesting.text(kb, "bikes-2.md", text)
    counts["rest"] = client.post(f"/ragstore/rags/{kb}/documents",
                                 json={"documents": [{"document_id": "bikes-3.md", "text": text}]}).json()["chunk_count"]
    counts["mcp"] = mcp_payload(mcp(runtime, "ingest_document", {"knowledge_base_id": kb, "document_name": "bikes-4.md", "text": text}))["chunks"]
    file = tmp_path / "bikes-5.md"
    file.write_text(text)
    printed = cli(data, "ingest", kb, str(file))
    assert printed.exit_code == 0 and "1 chunks" in printed.output
    counts["cli"] = 1
    job = client.post(f"/ragstore/rags/{kb}/ingest?documentName=bikes-6.md&replace=true", content=text, headers={"Content-Type": "text/plain"}).json()
    runtime.jobs.start()
    runtime.jobs.wait_idle(60)
    counts["queued"] = client.get(f"/ragstore/rags/{kb}/ingestion/{job['ingestionId']}/status").json()["chunks"]
    assert set(counts.values()) == {1}, counts
    listed = {d["documentId"]: d["chunks"] for d in runtime.documents.list(kb)["documents"]}
    rest = {d["documentId"]: d["chunks"] for d in client.get(f"/ragstore/rags/{kb}/documents").json()["documents"]}
    assert listed == rest and all(listed[f"bikes-{i}.md"] == 1 for i in range(1, 7))
    assert runtime.documents.delete(kb, "bikes-1.md") == 1
    assert client.delete(f"/ragstore/rags/{kb}/documents/bikes-2.md").json()["removed"] == 1
    assert runtime.documents.delete(kb, "bikes-1.md") == 0 and client.delete(f"/ragstore/rags/{kb}/documents/bikes-2.md").status_code == 404


def test_ingesting_refuses_a_blank_document_name_on_every_face(faces):
    runtime, client, kb, _ = faces
    with pytest.raises(EddiRagError, match="documentName must not be blank"):
        runtime.ingest(kb, "  ", "some text")
    rest = client.post(f"/ragstore/rags/{kb}/ingest?documentName=%20", content="some text", headers={"Content-Type": "text/plain"})
    assert rest.status_code == 422 and "documentName" in rest.json()["error"]  # the OpenAPI schema says it (pattern \S)
    tool = mcp(runtime, "ingest_document", {"knowledge_base_id": kb, "document_name": " ", "text": "some text"})
    assert tool.is_error and "documentName must not be blank" in tool.content[0].text


def test_purge_is_the_same_verb_on_every_face(faces):
    runtime, client, kb, data = faces
    runtime.ingest(kb, "old.md", "A notice that expired long ago.", ttl_seconds=0.001)
    assert client.post(f"/ragstore/rags/{kb}/purge").json()["removed"] == 1
    assert runtime.documents.purge_expired(kb) == 0
    assert "removed 0 expired" in cli(data, "purge", kb).output


# -- health -------------------------------------------------------------------------------------

def test_health_and_doctor_agree_on_every_face(faces):
    runtime, client, kb, data = faces
    library, rest = runtime.health.of(kb), client.get(f"/ragstore/rags/{kb}/health").json()
    assert {k: v for k, v in library.items() if k != "timestamp"} == {k: v for k, v in rest.items() if k != "timestamp"}
    checks = [(c.check, c.ok) for c in runtime.health.checks(kb)]
    assert [(c["check"], c["ok"]) for c in client.get(f"/ragstore/rags/{kb}/doctor").json()] == checks
    assert all(ok for _, ok in checks)
    assert "all checks passed" in cli(data, "doctor").output


# -- saving a resource ------------------------------------------------------------------------------

def test_saving_refuses_the_same_configuration_on_every_face(faces, tmp_path):
    runtime, client, _, data = faces
    with pytest.raises(EddiRagError) as library:
        runtime.saving.create("rags", BAD_KB)
    assert library.value.status == 400 and "$.storeType" in str(library.value)
    rest = client.post("/ragstore/rags", json=BAD_KB)
    assert rest.status_code == 400 and [e["path"] for e in rest.json()["errors"]] == ["$.storeType"]
    page = client.post("/ui/kbs", data={"name": "Broken", "storeType": "nope", "embeddingProvider": "local"}, follow_redirects=False)
    assert page.status_code == 400 and "$.storeType" in page.text and 'value="Broken"' in page.text  # the dialog again
    imported = client.post("/backup/import", content=export_zip(rag=BAD_KB), headers={"Content-Type": "application/zip"})
    assert imported.status_code == 400 and "$.storeType" in imported.json()["error"]
    (tmp_path / "rags").mkdir()
    (tmp_path / "rags" / "broken.json").write_text(json.dumps(BAD_KB))
    loaded = cli(data, "load", str(tmp_path))
    assert loaded.exit_code == 1 and "$.storeType" in loaded.output
    assert "Broken" not in [d.name for d in runtime.resources.descriptors("rags", "", 0, 100)]


def test_saving_accepts_the_same_configuration_on_every_face(faces, tmp_path):
    runtime, client, _, data = faces
    good = {**KB, "name": "Saved", "sources": [{"name": "site", "sitemap": {"url": "https://example.org/sitemap.xml"}}]}
    by_library = runtime.resources.read("rags", runtime.saving.create("rags", good).id)
    location = client.post("/ragstore/rags", json=good).headers["location"]
    by_rest = client.get(location.split("eddi://ai.labs.rag")[1].split("?")[0]).json()
    strip = lambda d: {**d, "sources": [{k: v for k, v in s.items() if k != "id"} for s in d["sources"]]}  # noqa: E731
    assert strip(by_library) == strip(by_rest) and by_library["sources"][0]["id"] and by_rest["sources"][0]["id"]


def test_langgraph_and_the_library_run_the_same_turn(faces):
    runtime, _, kb, _ = faces
    pytest.importorskip("langgraph")
    from eddi_rag.interop.langgraph import rag_runnable
    from eddi_rag.workflow.memory import ConversationMemory

    runtime.saving.put("llm", "parity-llm", {"tasks": [{"id": "t", "type": "openai", "parameters": {"systemMessage": "Be brief."},
                                                        "knowledgeBases": [{"name": "Trains"}]}]})
    runtime.saving.put("workflows", "parity-wf", {"workflowSteps": [
        {"type": "eddi://ai.labs.llm", "config": {"uri": "eddi://ai.labs.llm/llmstore/llmconfigs/parity-llm?version=1"}},
        {"type": "eddi://ai.labs.rag", "config": {"uri": f"eddi://ai.labs.rag/ragstore/rags/{kb}?version=1"}}]})
    runtime.saving.put("agents", "parity", {"workflows": ["eddi://ai.labs.workflow/workflowstore/workflows/parity-wf?version=1"]})
    library = runtime.turns.run(ConversationMemory(agent_id="parity", user_input=QUESTION)).system_message
    chain = rag_runnable(runtime.turns, "parity").invoke({"messages": [("human", QUESTION)]})
    assert unquoted(chain["system_message"]) == unquoted(library) and "22:10" in library


# -- rules that lived in one face only (issue 31) -------------------------------------------------

def test_deleting_a_document_lets_its_kept_file_go_from_python_as_from_rest(tmp_path):
    """The body of a document's upload is kept for re-parsing while the document lives, and freed with it, whoever
    deletes it (before: only REST freed it; Python, and so MCP and the CLI, left it in ingestion_jobs)."""
    with Runtime(tmp_path) as runtime:
        kb = runtime.saving.create("rags", KB).id
        for name in ("rest.md", "python.md"):  # (processed here: no worker runs before the app starts)
            runtime.jobs.process(runtime.ingesting.submit(kb, name, b"# Night trains\n\nThey leave at 22:10.").id)
            assert runtime.ingesting.reparsable(kb, name)  # kept: it can be re-parsed
        with TestClient(create_app(runtime)) as client:
            assert client.delete(f"/ragstore/rags/{kb}/documents/rest.md").status_code == 200
        assert runtime.documents.delete(kb, "python.md") > 0
        assert runtime.jobs.original(kb, "rest.md") is None and runtime.jobs.original(kb, "python.md") is None
        assert runtime.db.query("SELECT COUNT(*) FROM ingestion_bodies")[0][0] == 0


def test_a_refused_upload_stays_in_the_history_from_python_as_from_rest(tmp_path):
    """An upload refused for what it is stays in the KB's ingestion history as a failed ingestion saying why (before:
    only REST kept it)."""
    with Runtime(tmp_path) as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        kb = runtime.saving.create("rags", KB).id
        refused = client.post(f"/ragstore/rags/{kb}/ingest?documentName=tool.exe", content=b"MZ\x90\x00\x03binary",
                              headers={"Content-Type": "application/octet-stream"})
        assert refused.status_code == 415, refused.text
        with pytest.raises(EddiRagError) as e:
            runtime.ingesting.submit(kb, "tool2.exe", b"MZ\x90\x00\x03binary", "application/octet-stream")
        assert e.value.status == 415
        history = {j.document: j.status for j in runtime.jobs.of_kb(kb)}
        assert set(history) == {"tool.exe", "tool2.exe"} and all(s.startswith("failed: ") for s in history.values())


def test_every_face_lists_all_of_a_tenants_knowledge_bases(tmp_path):
    """No face stops at a cap of its own (before: MCP and the Manager read the first 1,000, so the oldest KB of a
    tenant with more was neither listed nor found by its name)."""
    with Runtime(tmp_path) as runtime:
        oldest = runtime.saving.create("rags", {**KB, "name": "Oldest"}).id
        runtime.ingesting.text(oldest, "night.md", DOCS["night.md"] if "night.md" in DOCS else "The night train leaves at 22:10.")
        for i in range(1000):
            runtime.resources.create("rags", {**KB, "name": f"KB {i}"})
        runtime.resources.create("rags", {**KB, "name": "Elsewhere"}, tenant="other")
        listed = list(runtime.knowledge_bases.every("default"))
        assert len(listed) == 1001 and listed[-1].name == "Oldest"
        assert len(mcp_payload(mcp(runtime, "list_knowledge_bases", {}))["result"]) == 1001
        found = mcp(runtime, "search_knowledge_base", {"knowledge_base_id": "Oldest", "query": "night train"})
        assert not found.is_error, found.content
        first_agent = runtime.resources.create("agents", {"workflows": []}, name="First agent").id
        for i in range(1000):
            runtime.resources.create("agents", {"workflows": []}, name=f"Agent {i}")
        agents = [d.name for d in runtime.catalog.every("agents", "default")]
        assert len(agents) == 1001 and "First agent" in agents
        with TestClient(create_app(runtime)) as client:
            assert f"/ui/kbs/{oldest}" in client.get("/ui").text
            page = client.get("/ui/agents").text  # (before: the first 1,000 only)
            assert first_agent in page and all(parse_uri(d.resource).id in page for d in runtime.catalog.every("agents", "default"))


def test_an_ingestion_is_followed_retried_and_cancelled_through_one_verb(tmp_path):
    """Status, history, retry and cancel are Ingesting's, on REST as in Python: another KB's ingestion is unknown
    to both (404), a pending one cancels, a cancelled one is queued again."""
    from eddi_rag.ingest.jobs import UnknownIngestionError

    with Runtime(tmp_path) as runtime:
        kb, other = (runtime.saving.create("rags", {**KB, "name": n}).id for n in ("One", "Two"))
        job = runtime.ingesting.submit(kb, "a.md", b"# A\n\nText.")  # (no worker runs yet: it waits)
        with pytest.raises(UnknownIngestionError):
            runtime.ingesting.job(other, job.id)
        assert runtime.ingesting.cancel(kb, job.id).status == "cancelled"
        with TestClient(create_app(runtime), raise_server_exceptions=False) as client:  # (its worker runs)
            assert client.get(f"/ragstore/rags/{other}/ingestion/{job.id}/status").status_code == 404
            assert client.get(f"/ragstore/rags/{kb}/ingestion/{job.id}/status").json()["status"] == "cancelled"
            assert client.post(f"/ragstore/rags/{kb}/ingestion/{job.id}/retry").json()["status"] != "cancelled"
            assert [j.id for j in runtime.ingesting.history(kb)] == \
                [j["ingestionId"] for j in client.get(f"/ragstore/rags/{kb}/ingestions").json()]


@pytest.mark.integration  # a folder source's preview, over REST and from Python
def test_source_previews_and_run_history_are_bounded_from_python_as_from_rest(tmp_path, monkeypatch):
    """The preview bound (3 at once, then 429) and the history's bounds (1 to 200) held only on REST before."""
    import threading

    from eddi_rag.verbs.sources import MAX_PREVIEWS, TooManyPreviewsError

    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "rail.md").write_text(DOCS["rail.md"])
    runtime = Runtime(tmp_path / "data")
    kb = runtime.saving.create("rags", {**KB, "sources": [{"name": "docs", "folder": {"path": str(tmp_path / "docs")}}]}).id
    release, held = threading.Event(), threading.Barrier(MAX_PREVIEWS + 1)
    context = runtime.sources.context  # (what a connector is handed before it lists)

    def slow_context(*args, **kwargs):
        held.wait(30)
        release.wait(30)
        return context(*args, **kwargs)

    monkeypatch.setattr(runtime.sources, "context", slow_context)
    previews = [threading.Thread(target=runtime.sources.preview, args=(kb, "docs")) for _ in range(MAX_PREVIEWS)]
    for thread in previews:
        thread.start()
    held.wait(30)  # three previews under way
    with pytest.raises(TooManyPreviewsError):
        runtime.sources.preview(kb, "docs")
    with TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        answer = client.post(f"/ragstore/rags/{kb}/sources/docs/preview")
        assert (answer.status_code, answer.headers["Retry-After"]) == (429, "10")
        release.set()
        for thread in previews:
            thread.join(30)
        monkeypatch.setattr(runtime.sources, "context", context)
        assert runtime.sources.preview(kb, "docs")["add"]
        runtime.sources.run(kb, "docs")
        assert len(client.get(f"/ragstore/rags/{kb}/sources/docs/runs", params={"limit": 10_000}).json()) == 1
        assert len(runtime.sources.runs(kb, "docs", 0)) == 1  # bounded to 1…200 in the verb (an empty page before)
    runtime.close()


def test_a_vote_and_a_test_question_name_only_a_chunk_the_caller_sees_from_python_as_from_rest(tmp_path):
    """A vote, or a test question made from one, names a chunk of the KB the caller's search can find (before: only
    REST checked; Python, and so any other face, kept a vote on a chunk that is not there, or another user's)."""
    with Runtime(tmp_path) as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        kb = runtime.saving.create("rags", KB).id
        runtime.ingesting.text(kb, "rail.md", DOCS["rail.md"])
        runtime.ingesting.text(kb, "mine.md", "Anna's seat is 42 in coach 3.", user_id="anna")
        shared = runtime.query(kb, QUESTION, max_results=1)[0].id
        private = runtime.documents.chunks(kb, "mine.md")[0]["id"]
        for chunk in ("nope", private):
            answer = client.post(f"/ragstore/rags/{kb}/feedback", json={"query": QUESTION, "chunkId": chunk, "vote": "down"})
            with pytest.raises(EddiRagError) as e:
                runtime.feedback.record("default", kb, QUESTION, chunk, "down", user_id="bob")
            assert (answer.status_code, e.value.status) == (404, 404) and answer.json()["error"] == str(e.value)
            asked = client.post(f"/ragstore/rags/{kb}/questions", json={"question": QUESTION, "chunkId": chunk})
            with pytest.raises(EddiRagError) as e:
                runtime.questions.add("default", kb, QUESTION, chunk, user_id="bob")
            assert (asked.status_code, e.value.status) == (404, 404) and asked.json()["error"] == str(e.value)
        assert runtime.feedback.record("default", kb, QUESTION, private, "up", user_id="anna").chunkId == private
        assert client.post(f"/ragstore/rags/{kb}/feedback", json={"query": QUESTION, "chunkId": shared, "vote": "up"}).status_code == 201
        assert len(runtime.feedback.list("default")) == 2
        with pytest.raises(EddiRagError) as e:
            runtime.questions.add("default", kb, "  ")
        assert e.value.status == 400 and client.post(f"/ragstore/rags/{kb}/questions", json={"question": "x" * 2001}).status_code == 422


def test_another_tenants_resources_and_variables_do_not_exist_from_python_as_from_rest(tmp_path):
    """The tenant rules of reading a resource and of EDDI's global variables are the verbs' (before: the REST
    routes checked them)."""
    from eddi_rag.auth.keys import KeyStore

    with Runtime(tmp_path) as runtime:
        theirs = runtime.saving.create("rags", KB, "other").id
        runtime.variables.put("other", "region", "eu")
        key = KeyStore(runtime.db).create("default", "editor")[1]
        with TestClient(create_app(runtime), raise_server_exceptions=False, headers={"Authorization": f"Bearer {key}"}) as client:
            assert client.get(f"/ragstore/rags/{theirs}").status_code == 404
            assert client.get("/variablestore/variables/other").status_code == 404
        for call in (lambda: runtime.catalog.read("rags", theirs, tenant="default"),
                     lambda: runtime.catalog.export_agent(theirs, "default"),
                     lambda: runtime.variables.list("other", caller_tenant="default")):
            with pytest.raises(EddiRagError) as e:
                call()
            assert e.value.status == 404
        assert runtime.catalog.read("rags", theirs, tenant="other")["name"] == "Trains"


def test_keys_are_one_verb_on_the_cli_and_rest(tmp_path):
    """A key the CLI creates lists on REST and the other way round; one the CLI revokes is refused on REST."""
    created = cli(tmp_path, "keys", "create", "--tenant", "acme", "--role", "admin", "--name", "ops")
    assert created.exit_code == 0, created.output
    secret = created.output.strip().splitlines()[-1]
    with Runtime(tmp_path) as runtime, TestClient(create_app(runtime), headers={"Authorization": f"Bearer {secret}"}) as client:
        made = client.post("/keys", json={"role": "viewer", "name": "reader"}).json()
        listed = {k["name"]: k["id"] for k in client.get("/keys").json()}
        assert set(listed) == {"ops", "reader"} and listed["reader"] == made["id"]
    printed = cli(tmp_path, "keys", "list", "--tenant", "acme")
    assert all(key_id in printed.output for key_id in listed.values())
    assert cli(tmp_path, "keys", "revoke", listed["ops"]).exit_code == 0
    with Runtime(tmp_path) as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        assert client.get("/keys", headers={"Authorization": f"Bearer {secret}"}).status_code == 401


def test_an_agent_exports_and_imports_the_same_on_the_cli_and_rest(tmp_path):
    """``eddi-rag export`` / ``load`` and ``/backup/export`` / ``/backup/import`` are the catalog's verbs: the same
    zip out, the same resources in."""
    import io
    import zipfile

    def unzipped(data: bytes) -> dict[str, bytes]:
        with zipfile.ZipFile(io.BytesIO(data)) as z:
            return {n: z.read(n) for n in z.namelist()}

    with Runtime(tmp_path) as runtime:
        report = runtime.catalog.import_agents(export_zip(), "default")
        agent = report.agents[-1].id
        with TestClient(create_app(runtime)) as client:
            rest = client.post(f"/backup/export/{agent}").content
            imported = client.post("/backup/import", content=rest, headers={"Content-Type": "application/zip"}).json()
    out = tmp_path / "agent.zip"
    assert cli(tmp_path, "export", agent, "--out", str(out)).exit_code == 0
    assert unzipped(out.read_bytes()) == unzipped(rest)
    loaded = cli(tmp_path, "load", str(out))
    assert loaded.exit_code == 0, loaded.output
    assert len([line for line in loaded.stdout.splitlines() if line.startswith("eddi://")]) == len(imported["created"])


def test_a_source_runs_the_same_from_the_cli_rest_and_python(tmp_path, monkeypatch):
    """One run at a time, whoever starts it; each face's run lands in the one history, counted alike."""
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "rail.md").write_text(DOCS["rail.md"])
    with Runtime(tmp_path / "data") as runtime:
        kb = runtime.saving.create("rags", {**KB, "sources": [{"name": "docs", "folder": {"path": str(tmp_path / "docs")}}]}).id
    ran = cli(tmp_path / "data", "sources", "run", kb, "docs")
    assert ran.exit_code == 0 and "added 1" in ran.output, ran.output
    (tmp_path / "docs" / "menu.md").write_text(DOCS["menu.md"])
    with Runtime(tmp_path / "data") as runtime, TestClient(create_app(runtime)) as client:
        assert client.post(f"/ragstore/rags/{kb}/sources/docs/run").status_code == 202
        runs = until(lambda: (r := client.get(f"/ragstore/rags/{kb}/sources/docs/runs").json())[0]["status"] != "RUNNING" and r,
                     "the REST run to end")
        python = runtime.sources.run(kb, "docs")
        assert [(r["added"], r["unchanged"]) for r in runs] == [(1, 1), (1, 0)] and (python.added, python.unchanged) == (0, 2)
        assert runtime.sources.runs(kb, "docs") == client.get(f"/ragstore/rags/{kb}/sources/docs/runs").json()


def test_a_collection_is_the_same_from_python_and_rest(tmp_path):
    """The collections API's verb: what Python writes REST reads and the other way round; another tenant's
    collection does not exist for the caller on either face."""
    with Runtime(tmp_path) as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        runtime.collections.create("default", "trips", {"team": "rail"})
        added = client.post("/collections/trips/documents", json={"documents": [
            {"id": "a", "text": "Night train", "embedding": [1.0, 0.0], "metadata": {"line": "night"}}]})
        assert added.status_code == 200, added.text
        assert runtime.collections.documents("default", "trips")["documents"][0]["id"] == "a"
        assert client.get("/collections/trips").json() == runtime.collections.get("default", "trips")
        runtime.collections.create("other", "theirs")
        with pytest.raises(EddiRagError) as e:
            runtime.collections.get("default", "theirs")
        assert e.value.status == client.get("/collections/theirs").status_code == 404
