"""An MCP server (the official ``mcp`` package) over the knowledge bases: ``eddi-rag mcp`` on stdio,
and ``/mcp`` (streamable HTTP) on ``eddi-rag serve``.

Tools: ``list_knowledge_bases``, ``search_knowledge_base`` (query, k, where; scored results with
their sources and citations), ``ingest_document``. Over HTTP the caller's credential decides as on
every other route (tenant, role, the user it retrieves as); on stdio the caller is the local user,
trusted as the CLI is.

EDDI's MCP contract (its notes on upgrading from 6.5): a failed call is a tool result with ``isError: true`` whose text
is the JSON REST answers with plus an ``errorCode`` (``FORBIDDEN`` for a role refusal), never a protocol error; an
optional argument is optional, its default in the tool's schema; and a tool admits whom the REST route doing the same
admits (``MATRIX``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeGuard, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, TextContent
from pydantic import Field, ValidationError

from eddi_rag.auth import TRUSTED, Principal
from eddi_rag.auth.http import check_role
from eddi_rag.auth.http import who as audited
from eddi_rag.common import jsonvalues
from eddi_rag.errors import EddiRagError
from eddi_rag.resource_types import ResourceNotFoundError, parse_uri
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.audit import ACTING, Acting
from eddi_rag.verbs.search import SearchRequest

log = logging.getLogger(__name__)

INSTRUCTIONS = ("Knowledge bases of eddi-rag. Call list_knowledge_bases to see what exists, search_knowledge_base "
                "to find passages (cite them by their citation), ingest_document to add a text. A failed call is an "
                "error result whose JSON says what is wrong (error) and its kind (errorCode: BAD_REQUEST, FORBIDDEN, "
                "NOT_FOUND, CONFLICT, UNAVAILABLE...).")
MAX_K = 50
T = TypeVar("T")

# Each tool admits whom the REST route doing the same admits (eddi_rag.api): its role (viewer < editor < admin), and on
# a knowledge base shared with named users and groups (grants) the access it needs there (VIEW reads, EDIT changes).
MATRIX: dict[str, tuple[str, str, str]] = {
    "list_knowledge_bases": ("viewer", "VIEW", "GET /ragstore/rags/descriptors (a knowledge base shared with others left out)"),
    "search_knowledge_base": ("viewer", "VIEW", "POST /ragstore/rags/{id}/query"),
    "ingest_document": ("editor", "EDIT", "POST /ragstore/rags/{id}/ingest"),
}

# errorCode from a product error's HTTP status: the one mapping REST answers with (api/errors.py), named as EDDI's MCP
# tools name theirs (NOT_FOUND, FORBIDDEN, BAD_REQUEST, CONFLICT, INTERNAL); EDDI names none for 401, 429 and a
# dependency that is down, so those three are ours. Another 4xx is the caller's: BAD_REQUEST; another 5xx: INTERNAL.
CODES = {400: "BAD_REQUEST", 401: "UNAUTHENTICATED", 403: "FORBIDDEN", 404: "NOT_FOUND", 409: "CONFLICT",
         429: "TOO_MANY_REQUESTS", 502: "UNAVAILABLE", 503: "UNAVAILABLE", 504: "UNAVAILABLE"}


def error_code(status: int) -> str:
    return CODES.get(status) or ("BAD_REQUEST" if 400 <= status < 500 else "INTERNAL")


class ArgumentError(EddiRagError, ValueError):
    """An argument the tool refuses (blank, a control character...), named in the message (HTTP 400)."""
    status = 400


def anticipated(error: BaseException | None) -> TypeGuard[EddiRagError]:
    """An error the caller can act on (a product error: bad input, not found, refused, a store down...):
    its message goes back as the tool's error; anything else is a crash, reported without its text."""
    return isinstance(error, EddiRagError)


def failed(body: dict[str, Any], code: str) -> CallToolResult:
    """A failed call: isError, its text the JSON ``body`` with ``errorCode`` (UTF-8, as REST's)."""
    return CallToolResult(content=[TextContent(type="text", text=json.dumps({**body, "errorCode": code}, ensure_ascii=False))],
                          is_error=True)


def invalid(error: ValidationError) -> str:
    """Arguments that do not fit the tool's schema, each named (never the values: they are the caller's data)."""
    return "; ".join(f"{'.'.join(str(part) for part in e['loc']) or 'arguments'}: {e['msg']}" for e in error.errors())


class Server(MCPServer):
    """MCPServer whose failed calls follow EDDI's contract: every one an error result with its ``errorCode``."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except MCPError:
            raise
        except ToolError as e:  # the SDK's wrapper of whatever the tool, or the arguments' validation, raised
            cause = e.__cause__
            if anticipated(cause):
                return failed(cause.body(), error_code(cause.status))
            if isinstance(cause, ValidationError):
                return failed({"error": invalid(cause)}, "BAD_REQUEST")
            if not isinstance(e, UnexpectedToolError):  # the SDK's own refusal
                if name not in {t.name for t in await self.list_tools()}:
                    return failed({"error": f"no tool {name!r} (tools/list shows them)"}, "NOT_FOUND")
                return failed({"error": str(e)}, "BAD_REQUEST")
            incident = uuid.uuid4().hex[:12]
            log.error("unexpected error %s in MCP tool %s", incident, name, exc_info=cause or e)
            return failed({"error": f"internal error (logged as {incident})"}, "INTERNAL")


async def in_thread(work: Callable[[], T]) -> T:
    """Blocking work (the stores, the model) off the event loop."""
    return await anyio.to_thread.run_sync(work)


# The arguments, described in the tools' schemas.
KnowledgeBaseRef = Annotated[str, Field(description="the knowledge base: its id or its exact name (list_knowledge_bases shows both)")]
Query = Annotated[str, Field(description="what to find, in the words of any language")]
K = Annotated[int, Field(ge=1, le=MAX_K, description=f"how many results, the best first (1 to {MAX_K})")]
Where = Annotated[dict[str, Any] | None, Field(description='a metadata filter: {"field": value}, $eq/$ne/$gt/$gte/$lt/$lte/$in/$nin, '
                                                           "$and/$or; none: every chunk")]
UserId = Annotated[str | None, Field(description="the user to search or ingest as; none: the credential's own user (only a "
                                                 "credential acting for users may name another)")]
DocumentName = Annotated[str, Field(description="the document's name (its source in results); a document of that name is replaced")]
Text = Annotated[str, Field(description="the document's text")]
Acl = Annotated[list[str] | None, Field(description='who may read it: principals such as "group:finance", "user:bob", '
                                                     '"deny:user:carol"; none: a document ingested again keeps its ACL, a '
                                                     "new one has none")]


def build_server(runtime: Runtime, principal: Callable[[Mapping[str, str] | None], Principal] = lambda _: TRUSTED) -> MCPServer:
    """``principal(headers)``: the caller of a request (headers None on stdio)."""
    # MCPServer calls logging.basicConfig (a rich handler on the root logger, at INFO) when the root has
    # no handler: a library must not set up the application's logging, so give it one for that moment.
    root, placeholder = logging.getLogger(), logging.NullHandler()
    root.addHandler(placeholder)
    try:
        server = Server(name="eddi-rag", instructions=INSTRUCTIONS)
    finally:
        root.removeHandler(placeholder)

    def caller(ctx: Context, tool: str, doing: str) -> Principal:
        """The caller, if its role may call ``tool`` (ForbiddenError otherwise)."""
        try:
            headers = ctx.headers
        except ValueError:  # no request context (a direct call)
            headers = None
        who = principal(headers)
        check_role(who, MATRIX[tool][0], doing)
        ACTING.set(Acting("mcp", audited(who)))  # this tool call's own context: its retrievals are recorded as MCP's
        return who

    def text_only(**arguments: Any) -> None:
        """An argument error naming the argument that holds a lone surrogate or a control character."""
        for name, value in arguments.items():
            if wrong := jsonvalues.problem(value, name) if not isinstance(value, str) else \
                    jsonvalues.text_problem(value, name, name=name != "text" and name != "query"):
                raise ArgumentError(wrong)

    def knowledge_base(who: Principal, ref: str, tool: str) -> str:
        """A KB of the caller's tenant by id, else by its exact name, that the caller may reach as ``tool`` needs: one
        shared with named users and groups, only if it is among them (ForbiddenError, as REST's 403)."""
        need = MATRIX[tool][1]
        ids = [ref] if runtime.catalog.exists("rags", ref, who.tenant) else []
        if not ids:
            ids = [parse_uri(d.resource).id for d in runtime.knowledge_bases.every(who.tenant) if d.name == ref]
        if not ids:
            raise ResourceNotFoundError(f"no knowledge base {ref!r} (give its id or exact name; list_knowledge_bases shows them)")
        id = next((i for i in ids if runtime.grants.may(who, i, need)), ids[0])
        runtime.grants.check(who, id, need)
        return id

    @server.tool()
    async def list_knowledge_bases(ctx: Context) -> list[dict[str, Any]]:
        """The knowledge bases you may search: id, name, description, store type, embedding provider."""
        who = caller(ctx, "list_knowledge_bases", "list knowledge bases")

        def run() -> list[dict[str, Any]]:
            out = []
            for d in runtime.knowledge_bases.every(who.tenant):
                id = parse_uri(d.resource).id
                if not runtime.grants.may(who, id, MATRIX["list_knowledge_bases"][1]):
                    continue  # shared with named users and groups, not this caller
                config = runtime.knowledge_bases.get(id)
                out.append({"id": id, "name": d.name, "description": d.description, "storeType": config.storeType,
                            "embeddingProvider": config.embeddingProvider, "embedding": "disabled" if config.embedding_disabled else "ok"})
            return out
        return await in_thread(run)

    @server.tool()
    async def search_knowledge_base(knowledge_base_id: KnowledgeBaseRef, query: Query, ctx: Context, k: K = 5,
                                    where: Where = None, user_id: UserId = None) -> dict[str, Any]:
        """Search one knowledge base (its id or exact name) for passages about ``query``: the best ``k``
        (at most 50) with score (0-1), source document and citation. ``where``: a metadata filter
        ({"field": value}, $eq/$ne/$gt/$gte/$lt/$lte/$in/$nin, $and/$or)."""
        who = caller(ctx, "search_knowledge_base", "search")
        text_only(knowledge_base_id=knowledge_base_id, query=query, user_id=user_id, where=where)
        if not query.strip():
            raise ArgumentError("query is blank")

        def run() -> dict[str, Any]:
            id = knowledge_base(who, knowledge_base_id, "search_knowledge_base")
            user = who.user_for(user_id)
            hits = runtime.search.hits(SearchRequest(id, query, k=k, where=where, user_id=user, reader=who.reader_for(user_id)))
            results = [{key: value for key, value in h.to_json().items() if key not in ("similarity", "distance")} for h in hits]
            return {"knowledgeBase": id, "query": query, "results": results}
        return await in_thread(run)

    @server.tool()
    async def ingest_document(knowledge_base_id: KnowledgeBaseRef, document_name: DocumentName, text: Text, ctx: Context,
                              user_id: UserId = None, acl: Acl = None) -> dict[str, Any]:
        """Add (or replace) a text document in a knowledge base (its id or exact name): chunked, embedded
        and stored before this returns. ``user_id``: keep it private to that user. ``acl``: who may read it
        (principals such as "group:finance", "user:bob", "deny:user:carol"; without it, a document ingested again
        keeps its ACL)."""
        who = caller(ctx, "ingest_document", "ingest")
        text_only(knowledge_base_id=knowledge_base_id, document_name=document_name, text=text, user_id=user_id)
        if not text.strip():
            raise ArgumentError("text is blank")

        def run() -> dict[str, Any]:
            id = knowledge_base(who, knowledge_base_id, "ingest_document")
            user = who.user_for(user_id)
            chunks = runtime.ingesting.text(id, document_name, text, user_id=user, acl=acl)
            return {"knowledgeBase": id, "document": document_name, "chunks": chunks}
        return await in_thread(run)

    return server
