"""The MCP server, driven by the mcp package's own client: on stdio (``eddi-rag mcp`` as a separate
process) and over streamable HTTP at /mcp on the real server, behind the same keys and tenants."""

import json
import sys

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from eddi_rag.api.app import create_app
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
    assert out["unknown"].is_error and "no knowledge base 'nope'" in out["unknown"].content[0].text


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
        hidden = anyio.run(call, url, viewer, "search_knowledge_base", {"knowledge_base_id": other, "query": "x"})
        assert hidden.is_error and "no knowledge base" in hidden.content[0].text
        refused = anyio.run(call, url, viewer, "ingest_document", {"knowledge_base_id": "Trains", "document_name": "a.md", "text": "x"})
        assert refused.is_error and "needs 'editor'" in refused.content[0].text
        private = {"knowledge_base_id": "Trains", "document_name": "ann.md", "text": "Ann's seat is 42A in coach 7."}
        assert payload(anyio.run(call, url, editor, "ingest_document", private))["chunks"] == 1
        mine = payload(anyio.run(call, url, editor, "search_knowledge_base", {"knowledge_base_id": "Trains", "query": "Ann's seat"}))
        theirs = payload(anyio.run(call, url, viewer, "search_knowledge_base", {"knowledge_base_id": "Trains", "query": "Ann's seat"}))
        assert "ann.md" in [r["source"] for r in mine["results"]]
        assert "ann.md" not in [r["source"] for r in theirs["results"]]  # a user's document stays theirs
        impersonate = anyio.run(call, url, editor, "search_knowledge_base", {"knowledge_base_id": "Trains", "query": "x", "user_id": "bob"})
        assert impersonate.is_error
    runtime.close()


@pytest.mark.parametrize("args,message", [({"query": " "}, "query is blank"), ({"query": "x", "k": 0}, "k must be within 1..50")])
def test_bad_arguments_are_tool_errors_naming_them(tmp_path, args, message):
    runtime = Runtime(tmp_path)
    seed(runtime)

    async def run(url: str):
        async with http_client(url) as client:
            return await client.call_tool("search_knowledge_base", {"knowledge_base_id": "Trains", **args})

    with serving(create_app(runtime)) as url:
        result = anyio.run(run, url)
    runtime.close()
    assert result.is_error and message in result.content[0].text


ODD_QUERIES = ["-x", "+", "a:b", '"', "^2", "~", "*", "[a TO b]", "AND OR NOT", "\\", "火车十点", "Zürich?", "x" * 10_000,
               "\ud800", " ", "title:(night OR", "夜行列車は"]


def test_any_string_is_a_query_on_the_mcp_face_too(tmp_path):
    """Issue 57, point 6 on MCP (the property test drives Python and REST): each odd string is answered, or is a tool
    error naming the query, never another failure."""
    from eddi_rag.interop.mcp import build_server

    runtime = Runtime(tmp_path)
    seed(runtime)

    async def run() -> list:
        async with Client(build_server(runtime)) as client:
            return [await client.call_tool("search_knowledge_base", {"knowledge_base_id": "Trains", "query": q})
                    for q in ODD_QUERIES]

    results = anyio.run(run)
    runtime.close()
    for query, result in zip(ODD_QUERIES, results):
        assert not result.is_error or "query" in result.content[0].text, (query[:20], result.content)
    assert sum(not r.is_error for r in results) >= len(ODD_QUERIES) - 4  # (blank, a lone surrogate, too long: refused)
