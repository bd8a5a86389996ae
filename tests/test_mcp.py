"""The MCP server, driven by the mcp package's own client: on stdio (``eddi-rag mcp`` as a separate
process) and over streamable HTTP at /mcp on the real server, behind the same keys and tenants; and EDDI's MCP
contract (its upgrading notes from 6.5, issue 67 point 8): a failed call is ``isError: true`` with an ``errorCode``
(FORBIDDEN for a role refusal), optional arguments are optional with their defaults in the schema, and each tool
admits whom its REST route admits."""

import json
import sys

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from eddi_rag.api.app import create_app
from eddi_rag.auth import Principal
from eddi_rag.interop.mcp import build_server
from eddi_rag.runtime import Runtime
from tests.support.browser import serving

pytestmark = [pytest.mark.integration]

DOCS = {"rail.md": "The night train to Vienna leaves at 22:10 from platform 4.",
        "menu.md": "The dining car serves goulash and apple strudel until 21:00."}


def seed(runtime: Runtime, name: str = "Trains", tenant: str = "default") -> str:
    kb = runtime.resources.create("rags", {"name": name, "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0},
                                  tenant=tenant).id
    for doc, text in DOCS.items():
        runtime.ingest(kb, doc, text)
    return kb


def refusal(result) -> dict:
    """A failed call's body: a tool result (never a protocol error) with isError and the JSON REST answers, plus its
    ``errorCode``."""
    assert result.is_error, result.content
    body = json.loads(result.content[0].text)
    assert isinstance(body, dict) and body.get("error") and body.get("errorCode"), body
    return body


def payload(result) -> object:
    """A tool result's structured content (or its JSON text)."""
    assert not result.is_error, result.content
    if result.structured_content is not None:
        content = result.structured_content
        return content.get("result", content) if isinstance(content, dict) and set(content) == {"result"} else content
    return json.loads(result.content[0].text)


async def _session(client: Client) -> dict:
    out = {"tools": sorted(t.name for t in (await client.list_tools()).tools)}
    out["kbs"] = payload(await client.call_tool("list_knowledge_bases", {}))
    out["search"] = payload(await client.call_tool("search_knowledge_base", {"knowledge_base_id": "Trains",
                                                                           "query": "When does the night train leave?", "k": 1}))
    out["ingest"] = payload(await client.call_tool("ingest_document", {"knowledge_base_id": "Trains", "document_name": "pets.md",
                                                                      "text": "Dogs travel free on night trains on a leash."}))
    out["after"] = payload(await client.call_tool("search_knowledge_base", {"knowledge_base_id": "Trains", "query": "dogs on a leash",
                                                                           "k": 1, "where": {"source": "pets.md"}}))
    out["unknown"] = await client.call_tool("search_knowledge_base", {"knowledge_base_id": "nope", "query": "x"})
    return out


def check(out: dict, kb: str) -> None:
    assert out["tools"] == ["ingest_document", "list_knowledge_bases", "search_knowledge_base"]
    assert [(k["id"], k["name"], k["embedding"]) for k in out["kbs"]] == [(kb, "Trains", "ok")]
    (best,) = out["search"]["results"]
    assert best["source"] == "rail.md" and "22:10" in best["text"] and 0 < best["score"] <= 1 and best["citation"]
    assert out["ingest"] == {"knowledgeBase": kb, "document": "pets.md", "chunks": 1}
    assert out["after"]["results"][0]["source"] == "pets.md"
    unknown = refusal(out["unknown"])
    assert unknown["errorCode"] == "NOT_FOUND" and "no knowledge base 'nope'" in unknown["error"]


def test_stdio_server_in_its_own_process(tmp_path):
    with Runtime(tmp_path) as runtime:
        kb = seed(runtime)
    params = StdioServerParameters(command=sys.executable, args=["-m", "eddi_rag.cli", "mcp", "--data-dir", str(tmp_path)])

    async def run() -> dict:
        async with Client(params, read_timeout_seconds=120) as client:
            return await _session(client)

    check(anyio.run(run), kb)


def http_client(url: str, key: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return Client(streamable_http_client(url + "/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=60)))


def test_streamable_http_on_serve(tmp_path):
    runtime = Runtime(tmp_path)
    kb = seed(runtime)

    async def run(url: str) -> dict:
        async with http_client(url) as client:
            return await _session(client)

    with serving(create_app(runtime)) as url:
        out = anyio.run(run, url)
    runtime.close()
    check(out, kb)


def test_http_tools_follow_keys_roles_tenants_and_users(tmp_path):
    runtime = Runtime(tmp_path)
    seed(runtime, "Trains", tenant="acme")
    other = seed(runtime, "Other", tenant="globex")
    _, viewer = runtime.keys.create("acme", "viewer")
    _, editor = runtime.keys.create("acme", "editor", user="ann")

    async def call(url: str, key: str | None, tool: str, args: dict):
        async with http_client(url, key) as client:
            return await client.call_tool(tool, args)

    with serving(create_app(runtime)) as url:
        no_key = httpx2.post(url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert no_key.status_code == 401 and "credential" in no_key.json()["error"]
        listed = payload(anyio.run(call, url, viewer, "list_knowledge_bases", {}))
        assert [k["name"] for k in listed] == ["Trains"]  # not globex's
        hidden = refusal(anyio.run(call, url, viewer, "search_knowledge_base", {"knowledge_base_id": other, "query": "x"}))
        assert hidden["errorCode"] == "NOT_FOUND" and "no knowledge base" in hidden["error"] and "Other" not in hidden["error"]
        refused = refusal(anyio.run(call, url, viewer, "ingest_document", {"knowledge_base_id": "Trains", "document_name": "a.md", "text": "x"}))
        assert refused == {"error": "role 'viewer' may not ingest; it needs 'editor' or above", "errorCode": "FORBIDDEN"}
        private = {"knowledge_base_id": "Trains", "document_name": "ann.md", "text": "Ann's seat is 42A in coach 7."}
        assert payload(anyio.run(call, url, editor, "ingest_document", private))["chunks"] == 1
        mine = payload(anyio.run(call, url, editor, "search_knowledge_base", {"knowledge_base_id": "Trains", "query": "Ann's seat"}))
        theirs = payload(anyio.run(call, url, viewer, "search_knowledge_base", {"knowledge_base_id": "Trains", "query": "Ann's seat"}))
        assert "ann.md" in [r["source"] for r in mine["results"]]
        assert "ann.md" not in [r["source"] for r in theirs["results"]]  # a user's document stays theirs
        impersonate = anyio.run(call, url, editor, "search_knowledge_base", {"knowledge_base_id": "Trains", "query": "x", "user_id": "bob"})
        assert refusal(impersonate)["errorCode"] == "FORBIDDEN"
    runtime.close()


@pytest.mark.parametrize("args,message", [({"query": " "}, "query is blank"), ({"query": "x", "k": 0}, "k: Input should be greater than or equal to 1"),
                                          ({"query": "x", "k": 51}, "k: Input should be less than or equal to 50")])
def test_bad_arguments_are_tool_errors_naming_them(tmp_path, args, message):
    runtime = Runtime(tmp_path)
    seed(runtime)

    async def run(url: str):
        async with http_client(url) as client:
            return await client.call_tool("search_knowledge_base", {"knowledge_base_id": "Trains", **args})

    with serving(create_app(runtime)) as url:
        result = anyio.run(run, url)
    runtime.close()
    assert refusal(result) == {"error": message, "errorCode": "BAD_REQUEST"}


ODD_QUERIES = ["-x", "+", "a:b", '"', "^2", "~", "*", "[a TO b]", "AND OR NOT", "\\", "火车十点", "Zürich?", "x" * 10_000,
               "\ud800", " ", "title:(night OR", "夜行列車は"]


def test_any_string_is_a_query_on_the_mcp_face_too(tmp_path):
    """Issue 57, point 6 on MCP (the property test drives Python and REST): each odd string is answered, or is a tool
    error naming the query, never another failure."""
    runtime = Runtime(tmp_path)
    seed(runtime)

    async def run() -> list:
        async with Client(build_server(runtime)) as client:
            return [await client.call_tool("search_knowledge_base", {"knowledge_base_id": "Trains", "query": q})
                    for q in ODD_QUERIES]

    results = anyio.run(run)
    runtime.close()
    for query, result in zip(ODD_QUERIES, results):
        assert not result.is_error or ("query" in refusal(result)["error"] and refusal(result)["errorCode"] == "BAD_REQUEST"), \
            (query[:20], result.content)
    assert sum(not r.is_error for r in results) >= len(ODD_QUERIES) - 4  # (blank, a lone surrogate, too long: refused)


# --- EDDI's MCP contract (issue 67, point 8) --------------------------------------------------------------------

async def _calls(server, calls: list[tuple[str, dict]]) -> list:
    async with Client(server) as client:
        return [await client.call_tool(tool, args) for tool, args in calls]


def test_a_failed_call_is_an_error_result_with_a_code(tmp_path, monkeypatch):
    """Every failure is a tool result with isError and {"error", "errorCode"}: the code from the error's HTTP status (the
    one mapping REST answers with too), the arguments' own mistakes BAD_REQUEST naming the argument, a crash INTERNAL
    without its text."""
    from eddi_rag.stores.base import StoreUnavailableError

    runtime = Runtime(tmp_path)
    seed(runtime, "Züge")
    cases = [("search_knowledge_base", {"knowledge_base_id": "火车时刻表", "query": "Wann fährt der Nachtzug?"}, "NOT_FOUND", "火车时刻表"),
             ("search_knowledge_base", {"knowledge_base_id": "Züge", "query": "  "}, "BAD_REQUEST", "query is blank"),
             ("search_knowledge_base", {"knowledge_base_id": "Züge", "query": "Nachtzug", "k": 0}, "BAD_REQUEST", "k: "),
             ("search_knowledge_base", {"knowledge_base_id": "Züge", "query": "Nachtzug", "k": "fünf"}, "BAD_REQUEST", "k: "),
             ("search_knowledge_base", {"query": "Nachtzug"}, "BAD_REQUEST", "knowledge_base_id: Field required"),
             ("search_knowledge_base", {"knowledge_base_id": "Züge", "query": "Nachtzug", "where": {"$regex": "x"}}, "BAD_REQUEST", "$regex"),
             ("ingest_document", {"knowledge_base_id": "Züge", "document_name": "leer.md", "text": " "}, "BAD_REQUEST", "text is blank"),
             ("ingest_document", {"knowledge_base_id": "Züge", "document_name": "a\x00b.md", "text": "Hallo"}, "BAD_REQUEST", "document_name"),
             ("no_such_tool", {}, "NOT_FOUND", "no_such_tool")]
    results = anyio.run(_calls, build_server(runtime), [(tool, args) for tool, args, _, _ in cases])
    for (tool, args, code, said), result in zip(cases, results):
        body = refusal(result)
        assert body["errorCode"] == code and said in body["error"], (tool, args, body)
        assert not body["error"].startswith("Error executing tool"), body  # the product's own words, as REST says them
    assert "火车时刻表" in results[0].content[0].text  # JSON as UTF-8, not \\u escapes

    def down(request):
        raise StoreUnavailableError("the vector store at db:5432 refused the connection")

    def crash(request):
        raise RuntimeError("geheimes Passwort hunter2")

    ask = ("search_knowledge_base", {"knowledge_base_id": "Züge", "query": "Nachtzug"})
    monkeypatch.setattr(runtime.search, "hits", down)
    (unavailable,) = anyio.run(_calls, build_server(runtime), [ask])
    monkeypatch.setattr(runtime.search, "hits", crash)
    (crashed,) = anyio.run(_calls, build_server(runtime), [ask])
    runtime.close()
    assert refusal(unavailable) == {"error": "the vector store at db:5432 refused the connection", "errorCode": "UNAVAILABLE"}
    body = refusal(crashed)
    assert body["errorCode"] == "INTERNAL" and "hunter2" not in crashed.content[0].text and "logged as" in body["error"]


def test_a_role_refusal_is_forbidden_on_every_tool_and_shows_nothing(tmp_path):
    """A caller whose role may not call a tool gets a tool result, isError with FORBIDDEN (never a protocol error or a
    crash), naming neither a knowledge base nor anything in it."""
    runtime = Runtime(tmp_path)
    kb = seed(runtime, "Kasse", tenant="acme")
    calls = [("list_knowledge_bases", {}), ("search_knowledge_base", {"knowledge_base_id": "Kasse", "query": "Nachtzug"}),
             ("ingest_document", {"knowledge_base_id": "Kasse", "document_name": "neu.md", "text": "Neue Zeilen für die Kasse."})]
    expected = {"viewer": ["ok", "ok", "FORBIDDEN"], "auditor": ["FORBIDDEN"] * 3, "none": ["FORBIDDEN"] * 3}
    found = {}
    for role in expected:
        results = anyio.run(_calls, build_server(runtime, lambda _, role=role: Principal("acme", role, "ann")), calls)
        found[role] = ["ok" if not r.is_error else refusal(r)["errorCode"] for r in results]
        for r in results:
            if r.is_error:
                assert kb not in r.content[0].text and "Kasse" not in r.content[0].text and "22:10" not in r.content[0].text
    runtime.close()
    assert found == expected


def test_each_tool_admits_whom_its_rest_route_admits(tmp_path):
    """The same role matrix as REST, per-knowledge-base sharing (grants) included: list_knowledge_bases as GET
    /ragstore/rags/descriptors, search_knowledge_base as POST .../query, ingest_document as POST .../ingest, for each
    kind of credential; a knowledge base shared with others is left out of the list and refused (FORBIDDEN)."""
    from fastapi.testclient import TestClient

    runtime = Runtime(tmp_path)
    shared, _ = seed(runtime, "Kasse", tenant="acme"), seed(runtime, "Fahrplan", tenant="acme")
    runtime.grants.set("acme", shared, [{"principal": "user:anna", "access": "VIEW"}, {"principal": "user:eva", "access": "EDIT"}])
    keys = {"admin": runtime.keys.create("acme", "admin")[1], "eva (editor, EDIT)": runtime.keys.create("acme", "editor", user="eva")[1],
            "bob (editor)": runtime.keys.create("acme", "editor", user="bob")[1],
            "anna (viewer, VIEW)": runtime.keys.create("acme", "viewer", user="anna")[1],
            "carl (viewer)": runtime.keys.create("acme", "viewer", user="carl")[1],
            "service (acts for users)": runtime.keys.create("acme", "viewer", acts_for_users=True)[1],
            "auditor": runtime.keys.create("acme", "auditor")[1]}
    rest = TestClient(create_app(runtime))
    code = {403: "FORBIDDEN", 404: "NOT_FOUND"}

    def over_rest(key: str) -> list:
        auth = {"Authorization": f"Bearer {key}"}
        listed = rest.get("/ragstore/rags/descriptors", params={"limit": 100}, headers=auth)
        searched = rest.post(f"/ragstore/rags/{shared}/query", json={"query": "Wann fährt der Nachtzug?"}, headers=auth)
        ingested = rest.post(f"/ragstore/rags/{shared}/ingest", params={"documentName": "kasse.md"}, content="Kassenbuch: 42 €".encode(),
                             headers={**auth, "Content-Type": "text/plain"})
        return [sorted(d["name"] for d in listed.json()) if listed.status_code == 200 else code[listed.status_code],
                *("ok" if r.status_code < 300 else code[r.status_code] for r in (searched, ingested))]

    def over_mcp(key: str) -> list:
        who = runtime.keys.authenticate(key)
        listed, searched, ingested = anyio.run(_calls, build_server(runtime, lambda _: who), [
            ("list_knowledge_bases", {}), ("search_knowledge_base", {"knowledge_base_id": shared, "query": "Wann fährt der Nachtzug?"}),
            ("ingest_document", {"knowledge_base_id": "Kasse", "document_name": "kasse.md", "text": "Kassenbuch: 42 €"})])
        return [sorted(k["name"] for k in payload(listed)) if not listed.is_error else refusal(listed)["errorCode"],
                *("ok" if not r.is_error else refusal(r)["errorCode"] for r in (searched, ingested))]

    both, mine = ["Fahrplan", "Kasse"], ["Fahrplan"]
    expected = {"admin": [both, "ok", "ok"], "eva (editor, EDIT)": [both, "ok", "ok"], "bob (editor)": [mine, "FORBIDDEN", "FORBIDDEN"],
                "anna (viewer, VIEW)": [both, "ok", "FORBIDDEN"], "carl (viewer)": [mine, "FORBIDDEN", "FORBIDDEN"],
                "service (acts for users)": [both, "ok", "FORBIDDEN"], "auditor": ["FORBIDDEN"] * 3}
    found_rest = {who: over_rest(key) for who, key in keys.items()}
    found_mcp = {who: over_mcp(key) for who, key in keys.items()}
    runtime.close()
    assert found_rest == expected
    assert found_mcp == found_rest


def test_each_tool_schema_requires_what_it_needs_and_gives_the_defaults_of_the_rest(tmp_path):
    """tools/list: ``required`` names only what a tool cannot work without; every other argument has its ``default``,
    every argument a description, and the bounds the tool holds are the schema's (k: 1..50); a call with the required
    arguments alone works."""
    runtime = Runtime(tmp_path)
    kb = seed(runtime, "Züge")

    async def run() -> tuple:
        async with Client(build_server(runtime)) as client:
            tools = {t.name: t.input_schema for t in (await client.list_tools()).tools}
            return tools, [await client.call_tool(tool, args) for tool, args in (
                ("list_knowledge_bases", {}), ("search_knowledge_base", {"knowledge_base_id": "Züge", "query": "Wann fährt der Nachtzug?"}),
                ("ingest_document", {"knowledge_base_id": kb, "document_name": "hunde.md", "text": "Hunde fahren im Nachtzug an der Leine gratis."}))]

    schemas, results = anyio.run(run)
    runtime.close()
    required = {"list_knowledge_bases": set(), "search_knowledge_base": {"knowledge_base_id", "query"},
                "ingest_document": {"knowledge_base_id", "document_name", "text"}}
    assert set(schemas) == set(required)
    for tool, schema in schemas.items():
        assert set(schema.get("required", [])) == required[tool], tool
        for name, prop in schema["properties"].items():
            assert prop.get("description"), (tool, name)
            assert name in required[tool] or "default" in prop, (tool, name)
    k = schemas["search_knowledge_base"]["properties"]["k"]
    assert (k["default"], k["minimum"], k["maximum"]) == (5, 1, 50)
    listed, searched, ingested = (payload(r) for r in results)
    assert [k["name"] for k in listed] == ["Züge"] and 1 <= len(searched["results"]) <= 5 and ingested["chunks"] == 1
