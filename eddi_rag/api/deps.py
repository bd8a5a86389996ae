"""What routes take from the app: the Runtime, range-checked version and offset parameters, and the
tenant check of /ragstore/rags/{id}/... (who the caller is: ``eddi_rag.auth.http``)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import Depends, Query, Request

from eddi_rag.auth import ForbiddenError, Principal
from eddi_rag.auth.http import Admin, Auditor, Editor, Viewer, principal_of
from eddi_rag.resource_types import MAX_VERSION
from eddi_rag.runtime import Runtime

__all__ = ["Admin", "Auditor", "Editor", "MAX_VERSION", "Offset", "RuntimeDep", "Version", "Viewer", "curators_only", "kb_of_tenant", "readable"]


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]

MAX_OFFSET = 10**9
# Integer query parameters, range-checked (422 naming the parameter) before they reach SQL.
Version = Annotated[int, Query(ge=0, le=MAX_VERSION, description="a version number; 0: the current one")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="how many items to skip")]


READS = frozenset({"query", "retrieve", "context", "feedback", "question-runs"})  # POSTs that only read a knowledge base


def kb_of_tenant(id: str, request: Request) -> None:
    """Router dependency for /ragstore/rags/{id}/...: the knowledge base must be the caller's tenant's, and when it is
    shared with named users and groups, the caller among them (VIEW to read it, EDIT to change it)."""
    runtime, caller = get_runtime(request), principal_of(request)
    runtime.catalog.own("rags", id, caller.tenant)
    route = getattr(request.scope.get("route"), "path", "")
    reads = request.method in ("GET", "HEAD") or route.rsplit("/", 1)[-1] in READS
    runtime.grants.check(caller, id, "VIEW" if reads else "EDIT")


def readable(runtime: Runtime, kb_id: str, caller: Principal) -> Any:
    """What ``caller`` may see of a knowledge base's documents, chunks and counts: everything for a caller who may edit
    it (it curates the documents and their ACLs: None); else what its own reader may read (retrieval.access; a
    knowledge base withheld from it: WithheldError, 403)."""
    if caller.allows("editor"):
        return None
    return runtime.search.readable(kb_id, caller.reader_for(None))


def curators_only(runtime: Runtime, kb_id: str, caller: Principal, what: str) -> None:
    """``what`` of a knowledge base that reads by permissions (audience OWNER or DOCUMENT_ACL) is its editors' alone: it
    shows chunks whatever their ACL (ForbiddenError, 403, for anyone else)."""
    if not caller.allows("editor") and runtime.knowledge_bases.get(kb_id).audience != "AGENT_USERS":
        raise ForbiddenError(f"{what} of knowledge base {kb_id}, which reads by permissions, are for its editors")
