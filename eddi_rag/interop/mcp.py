"""An MCP server (the official ``mcp`` package) over the knowledge bases: ``eddi-rag mcp`` on stdio,
and ``/mcp`` (streamable HTTP) on ``eddi-rag serve``.

Tools: ``list_knowledge_bases``, ``search_knowledge_base`` (query, k, where; scored results with
their sources and citations), ``ingest_document``. Over HTTP the caller's credential decides as on
every other route (tenant, role, the user it retrieves as); on stdio the caller is the local user,
trusted as the CLI is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from eddi_rag.auth import TRUSTED, Principal
from eddi_rag.auth.http import check_role
from eddi_rag.auth.http import who as audited
from eddi_rag.common import jsonvalues
from eddi_rag.errors import EddiRagError
from eddi_rag.resource_types import ResourceNotFoundError, parse_uri
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.audit import ACTING, Acting
from eddi_rag.verbs.search import SearchRequest

INSTRUCTIONS = ("Knowledge bases of eddi-rag. Call list_knowledge_bases to see what exists, search_knowledge_base "
                "to find passages (cite them by their citation), ingest_document to add a text.")
MAX_K = 50
T = TypeVar("T")


def anticipated(error: Exception) -> bool:
    """An error the caller can act on (a product error: bad input, not found, refused, a store down...):
    its message goes back as the tool's error; anything else is a crash, reported without its text."""
    return isinstance(error, EddiRagError)


async def in_thread(work: Callable[[], T]) -> T:
    """Blocking work (the stores, the model) off the event loop; anticipated errors as tool errors."""
    try:
        return await anyio.to_thread.run_sync(work)
    except Exception as e:
        if anticipated(e):
            raise ToolError(str(e)) from e
        raise


def build_server(runtime: Runtime, principal: Callable[[Mapping[str, str] | None], Principal] = lambda _: TRUSTED) -> MCPServer:
    """``principal(headers)``: the caller of a request (headers None on stdio)."""
    # MCPServer calls logging.basicConfig (a rich handler on the root logger, at INFO) when the root has
    # no handler: a library must not set up the application's logging, so give it one for that moment.
    root, placeholder = logging.getLogger(), logging.NullHandler()
    root.addHandler(placeholder)
    try:
        server = MCPServer(name="eddi-rag", instructions=INSTRUCTIONS)
    finally:
        root.removeHandler(placeholder)

    def caller(ctx: Context, role: str, doing: str) -> Principal:
        try:
            headers = ctx.headers
        except ValueError:  # no request context (a direct call)
            headers = None
        try:
            who = principal(headers)
            check_role(who, role, doing)
        except Exception as e:
            if anticipated(e):
                raise ToolError(str(e)) from e
            raise
        ACTING.set(Acting("mcp", audited(who)))  # this tool call's own context: its retrievals are recorded as MCP's
        return who

    def text_only(**arguments: Any) -> None:
        """A tool error naming the argument that holds a lone surrogate or a control character."""
        for name, value in arguments.items():
            if wrong := jsonvalues.problem(value, name) if not isinstance(value, str) else \
                    jsonvalues.text_problem(value, name, name=name != "text" and name != "query"):
                raise ToolError(wrong)

    def knowledge_base(who: Principal, ref: str) -> str:
        """A KB of the caller's tenant by id, else by its exact name."""
        ids = [ref] if runtime.catalog.exists("rags", ref, who.tenant) else []
        if not ids:
            ids = [parse_uri(d.resource).id for d in runtime.knowledge_bases.every(who.tenant) if d.name == ref]
        if not ids:
            raise ResourceNotFoundError(f"no knowledge base {ref!r} (give its id or exact name; list_knowledge_bases shows them)")
        return ids[0]

    @server.tool()
    async def list_knowledge_bases(ctx: Context) -> list[dict[str, Any]]:
        """The knowledge bases you may search: id, name, description, store type, embedding provider."""
        who = caller(ctx, "viewer", "list knowledge bases")

        def run() -> list[dict[str, Any]]:
            out = []
            for d in runtime.knowledge_bases.every(who.tenant):
                id = parse_uri(d.resource).id
                config = runtime.knowledge_bases.get(id)
                out.append({"id": id, "name": d.name, "description": d.description, "storeType": config.storeType,
                            "embeddingProvider": config.embeddingProvider, "embedding": "disabled" if config.embedding_disabled else "ok"})
            return out
        return await in_thread(run)

    @server.tool()
    async def search_knowledge_base(knowledge_base_id: str, query: str, ctx: Context, k: int = 5,
                                    where: dict[str, Any] | None = None, user_id: str | None = None) -> dict[str, Any]:
        """Search one knowledge base (its id or exact name) for passages about ``query``: the best ``k``
        (at most 50) with score (0-1), source document and citation. ``where``: a metadata filter
        ({"field": value}, $eq/$ne/$gt/$gte/$lt/$lte/$in/$nin, $and/$or)."""
        who = caller(ctx, "viewer", "search")
        text_only(knowledge_base_id=knowledge_base_id, query=query, user_id=user_id, where=where)
        if not query.strip():
            raise ToolError("query is blank")
        if not 1 <= k <= MAX_K:
            raise ToolError(f"k must be within 1..{MAX_K}, got {k}")

        def run() -> dict[str, Any]:
            id = knowledge_base(who, knowledge_base_id)
            user = who.user_for(user_id)
            hits = runtime.search.hits(SearchRequest(id, query, k=k, where=where, user_id=user, reader=who.reader_for(user_id)))
            results = [{key: value for key, value in h.to_json().items() if key not in ("similarity", "distance")} for h in hits]
            return {"knowledgeBase": id, "query": query, "results": results}
        return await in_thread(run)

    @server.tool()
    async def ingest_document(knowledge_base_id: str, document_name: str, text: str, ctx: Context,
                              user_id: str | None = None, acl: list[str] | None = None) -> dict[str, Any]:
        """Add (or replace) a text document in a knowledge base (its id or exact name): chunked, embedded
        and stored before this returns. ``user_id``: keep it private to that user. ``acl``: who may read it
        (principals such as "group:finance", "user:bob", "deny:user:carol"; without it, a document ingested again
        keeps its ACL)."""
        who = caller(ctx, "editor", "ingest")
        text_only(knowledge_base_id=knowledge_base_id, document_name=document_name, text=text, user_id=user_id)
        if not text.strip():
            raise ToolError("text is blank")

        def run() -> dict[str, Any]:
            id = knowledge_base(who, knowledge_base_id)
            user = who.user_for(user_id)
            chunks = runtime.ingesting.text(id, document_name, text, user_id=user, acl=acl)
            return {"knowledgeBase": id, "document": document_name, "chunks": chunks}
        return await in_thread(run)

    return server

