"""The audit record (docs/audit.md), for auditors and administrators alone: its entries filtered as an auditor asks
(who was shown a document, what a user was shown, what changed), exported as JSONL or CSV, and the chain verified."""

from __future__ import annotations

import csv
import io
import json
from typing import Any, Literal

from fastapi import APIRouter, Query
from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, Field

from eddi_rag.api.deps import Admin, Auditor, RuntimeDep
from eddi_rag.api.edge import ERROR_RESPONSES, Route

router = APIRouter(prefix="/audit", tags=["audit"], route_class=Route, responses=ERROR_RESPONSES)
CSV_COLUMNS = ("seq", "at", "action", "face", "who", "subject", "reader", "query", "documents", "detail")


@router.get("", responses={200: {"description": "the entries: JSON, or the export asked for", "content": {
    "application/json": {}, "application/jsonl": {}, "text/csv": {}}}})
def entries(runtime: RuntimeDep, caller: Auditor, action: str | None = None, face: str | None = None,
            user: str | None = Query(None, description="entries of this caller, or retrievals read as this user"),
            kb: str | None = Query(None, description="a knowledge base's id"),
            document: str | None = Query(None, description="retrievals that gave this document"),
            since: str | None = Query(None, max_length=40), until: str | None = Query(None, max_length=40), after: int = Query(0, ge=0, le=2**62),
            limit: int = Query(100, ge=1, le=10_000), format: Literal["json", "jsonl", "csv"] = "json") -> Any:
    """The tenant's entries in order (``after``: past this seq), filtered; ``format`` jsonl or csv for an export."""
    found = runtime.audit.entries(caller.tenant, action=action, face=face, user=user, subject=kb, document=document,
                                  since=since, until=until, limit=limit, after=after)
    if format == "jsonl":
        return Response("".join(json.dumps(e, ensure_ascii=False) + "\n" for e in found), media_type="application/jsonl")
    if format == "csv":
        out = io.StringIO()
        writer = csv.writer(out)
        writer.writerow(CSV_COLUMNS)
        for e in found:
            d = e["detail"]
            writer.writerow([e["seq"], e["at"], e["action"], e["face"], json.dumps(e["who"]), e["subject"] or "",
                             d.get("reader") or "", d.get("query") or "", " ".join(x["document"] for x in d.get("documents", [])),
                             json.dumps(d, ensure_ascii=False)])
        return Response(out.getvalue(), media_type="text/csv")
    return found


@router.get("/verify")
def verify(runtime: RuntimeDep, caller: Auditor) -> dict[str, Any]:
    """The whole chain walked: ``{ok, entries, problems: [{seq, problem}]}`` naming an edited, removed or moved entry."""
    return runtime.audit.verify()


@router.post("/erase")
def erase(runtime: RuntimeDep, caller: Admin, user: str = Query(..., min_length=1, max_length=200)) -> dict[str, Any]:
    """Erase one user's query texts from the tenant's record (GDPR Art. 17; administrators): the chain keeps a salted
    digest that says nothing once its salt is gone, so it still verifies. The erasure is an entry itself."""
    return {"user": user, "erased": runtime.audit.erase(caller.tenant, user)}



class AuditSettings(BaseModel):
    """A tenant's audit settings; a field left out or ``null``: the server's default (EDDI_RAG_AUDIT_RETENTION_DAYS,
    EDDI_RAG_AUDIT_QUERIES)."""
    model_config = ConfigDict(extra="forbid")
    auditRetentionDays: float | None = Field(None, ge=1, le=36_500, description="days an entry is kept; the scheduler "
                                             "empties older ones hourly (the chain still verifies)")
    auditQueries: Literal["full", "digest", "none"] | None = Field(None, description="how a retrieval's query is kept: "
                                                                   "in full (erasable), as its SHA-256, or not at all")


@router.get("/settings")
def settings(runtime: RuntimeDep, caller: Auditor) -> dict[str, Any]:
    """The tenant's own settings (``null``: the server's default) and those in effect (``effective``)."""
    return runtime.audit.settings(caller.tenant)


@router.put("/settings")
def set_settings(runtime: RuntimeDep, caller: Admin, body: AuditSettings) -> dict[str, Any]:
    """Set the tenant's retention and how a query is kept (administrators); the change is an entry of the record."""
    return runtime.audit.set_settings(caller.tenant, body.auditRetentionDays, body.auditQueries)
