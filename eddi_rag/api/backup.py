"""EDDI's backup: ``POST /backup/import`` with an agent export's zip as the body, ``POST /backup/export/{agentId}``
answering one."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from eddi_rag.api.deps import Editor, RuntimeDep
from eddi_rag.api.edge import ERROR_RESPONSES, Route
from eddi_rag.api.uploads import read_body

router = APIRouter(tags=["backup"], route_class=Route, responses=ERROR_RESPONSES)

ZIP_BODY = {"required": True, "description": "The zip EDDI's POST /backup/export/{agentId} writes.",
            "content": {"application/zip": {"schema": {"type": "string", "format": "binary"}},
                        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}


@router.post("/backup/import", status_code=201, openapi_extra={"requestBody": ZIP_BODY}, responses={
    201: {"description": "Imported: the agent's URI in Location; the created resources and what was skipped",
          "content": {"application/json": {"schema": {"type": "object"}}}}})
async def import_export(request: Request, runtime: RuntimeDep, caller: Editor) -> Any:
    """Import an EDDI agent export into the caller's tenant: the agent, its workflows and their RAG,
    LLM and httpCall configurations (references rewritten); all or nothing (400 naming what is wrong)."""
    data = await read_body(request, request.app.state.max_upload_bytes)
    report = runtime.catalog.import_agents(data, caller.tenant)
    headers = {"Location": report.agents[-1].uri} if report.agents else {}
    return JSONResponse(report.to_json(), status_code=201, headers=headers)


@router.post("/backup/export/{agentId}", response_class=Response, responses={
    200: {"description": "The agent's export, in EDDI's zip layout", "content": {"application/zip": {}}}})
def export(agentId: str, runtime: RuntimeDep, caller: Editor) -> Response:
    """The agent's current version, its workflows and their RAG, LLM and httpCall configurations, as EDDI's
    export writes them (literal secrets as ``${vault:REDACTED}``); EDDI, or ``/backup/import``, reads it."""
    data = runtime.catalog.export_agent(agentId, caller.tenant)
    return Response(data, media_type="application/zip",
                    headers={"Content-Disposition": f'attachment; filename="{agentId}.zip"'})
