"""API keys of the caller's tenant (admin): list, create (the secret is in the answer, once), revoke."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import ConfigDict, Field

from eddi_rag.api.deps import Admin, RuntimeDep
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.common.principals import ID_PATTERN
from eddi_rag.common.roles import KeyRole

router = APIRouter(prefix="/keys", tags=["keys"], route_class=Route, responses=ERROR_RESPONSES)


class KeyRequest(RequestBody):
    # a key that acts for users is bound to none; groups are the bound user's
    model_config = ConfigDict(json_schema_extra={"allOf": [
        {"if": {"properties": {"actsForUsers": {"const": True}}, "required": ["actsForUsers"]},
         "then": {"properties": {"user": {"type": "null"}}}},
        {"if": {"properties": {"groups": {"minItems": 1}}, "required": ["groups"]},
         "then": {"required": ["user"], "properties": {"user": {"type": "string"}}}}]})

    role: KeyRole  # auditor: the audit record alone
    user: str | None = None
    name: str | None = None
    actsForUsers: bool = False
    groups: list[Annotated[str, Field(min_length=1, max_length=200, pattern=ID_PATTERN)]] = Field(default_factory=list, max_length=100)


@router.get("")
def list_keys(runtime: RuntimeDep, caller: Admin) -> list[dict[str, Any]]:
    return [k.to_json() for k in runtime.keys.list(caller.tenant)]


@router.post("", status_code=201)
def create_key(body: KeyRequest, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    info, secret = runtime.keys.create(caller.tenant, body.role, body.user, body.name, body.actsForUsers, body.groups)
    return {**info.to_json(), "key": secret}


@router.delete("/{key_id}")
def revoke_key(key_id: str, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    return runtime.keys.revoke(key_id, caller.tenant).to_json()
