"""EDDI's global variables of the caller's tenant (``/variablestore/variables/{tenantId}``; editors, as in EDDI):
another tenant's path answers 404."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from eddi_rag.api.deps import Editor, RuntimeDep
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route

router = APIRouter(prefix="/variablestore/variables/{tenantId}", tags=["variables"], route_class=Route,
                   responses=ERROR_RESPONSES)


class VariableBody(RequestBody):
    key: str | None = None  # EDDI's body repeats the key; the path's wins
    value: str
    description: str | None = None
    exportable: bool = True


@router.get("")
def list_variables(tenantId: str, runtime: RuntimeDep, caller: Editor) -> list[dict[str, Any]]:
    """The tenant's variables: [{key, value, description, exportable}]."""
    return runtime.variables.list(tenantId, caller.tenant)


@router.get("/{key}")
def get_variable(tenantId: str, key: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    return runtime.variables.get(tenantId, key, caller.tenant)


@router.put("/{key}")
def put_variable(tenantId: str, key: str, body: VariableBody, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Create or update; knowledge bases read the new value the next time their configuration is read. A value holding
    a vault reference is an administrator's to write (403 for an editor)."""
    return runtime.variables.put(tenantId, key, body.value, body.description, body.exportable, caller.tenant,
                                 admin=caller.allows("admin"))


@router.delete("/{key}", response_class=Response)
def delete_variable(tenantId: str, key: str, runtime: RuntimeDep, caller: Editor) -> Response:
    runtime.variables.delete(tenantId, key, caller.tenant)
    return Response(status_code=200)
