"""EDDI's global variables of the caller's tenant (``/variablestore/variables/{tenantId}``; editors, as in EDDI):
another tenant's path answers 404."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from eddi_rag.api.deps import Editor, RuntimeDep
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.auth import Principal
from eddi_rag.resources.variables import VariableNotFoundError

router = APIRouter(prefix="/variablestore/variables/{tenantId}", tags=["variables"], route_class=Route,
                   responses=ERROR_RESPONSES)


class VariableBody(RequestBody):
    key: str | None = None  # EDDI's body repeats the key; the path's wins
    value: str
    description: str | None = None
    exportable: bool = True


def _own(tenantId: str, caller: Principal) -> None:
    if tenantId != caller.tenant:
        raise VariableNotFoundError(f"no tenant {tenantId!r}")


@router.get("")
def list_variables(tenantId: str, runtime: RuntimeDep, caller: Editor) -> list[dict[str, Any]]:
    """The tenant's variables: [{key, value, description, exportable}]."""
    _own(tenantId, caller)
    return runtime.variables.list(tenantId)


@router.get("/{key}")
def get_variable(tenantId: str, key: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    _own(tenantId, caller)
    return runtime.variables.get(tenantId, key)


@router.put("/{key}")
def put_variable(tenantId: str, key: str, body: VariableBody, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Create or update; knowledge bases read the new value the next time their configuration is read."""
    _own(tenantId, caller)
    # (a store or model is cached under its parameters with the values in: a new value builds a new one)
    return runtime.variables.put(tenantId, key, body.value, body.description, body.exportable)


@router.delete("/{key}", response_class=Response)
def delete_variable(tenantId: str, key: str, runtime: RuntimeDep, caller: Editor) -> Response:
    _own(tenantId, caller)
    runtime.variables.delete(tenantId, key)
    return Response(status_code=200)
