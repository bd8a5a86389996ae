"""The group directory of the caller's tenant (admin): which groups each user is in, read by searches of a user named
by a credential acting for users (the agent runtime's), under audience DOCUMENT_ACL (docs/permissions.md)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path
from pydantic import Field

from eddi_rag.api.deps import Admin, RuntimeDep
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.common.principals import ID_PATTERN

router = APIRouter(prefix="/ragstore/groups", tags=["permissions"], route_class=Route, responses=ERROR_RESPONSES)

UserId = Annotated[str, Path(min_length=1, max_length=200, pattern=ID_PATTERN)]


class Membership(RequestBody):
    groups: list[Annotated[str, Field(max_length=200, pattern=ID_PATTERN)]] = Field(max_length=1000)


@router.get("")
def members(runtime: RuntimeDep, caller: Admin) -> dict[str, list[str]]:
    """Every user of the tenant with a group: {user: [groups]}."""
    return runtime.groups.members(caller.tenant)


@router.get("/{user}")
def groups_of(user: UserId, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    return {"user": user, "groups": runtime.groups.of(caller.tenant, user)}


@router.put("/{user}")
def set_groups(user: UserId, body: Membership, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """``user``'s groups are these from now on (the next search reads with them)."""
    return {"user": user, "groups": runtime.groups.set(caller.tenant, user, body.groups)}
