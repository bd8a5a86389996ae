"""Who is who and who may reach what, in the caller's tenant (docs/permissions.md): the group directory (admin: which
groups each user is in, read by searches of a user named by a credential acting for users, under audience
DOCUMENT_ACL) and a knowledge base's grants (VIEW or EDIT per user or group, on top of tenant roles)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path
from pydantic import Field

from eddi_rag.api.deps import Admin, Editor, RuntimeDep, kb_of_tenant
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.common.principals import ID_PATTERN

GRANTEE_PATTERN = r"^(user|group):[^, \x00-\x1f\x7f][^,\x00-\x1f\x7f]*$"

router = APIRouter(prefix="/ragstore/groups", tags=["permissions"], route_class=Route, responses=ERROR_RESPONSES)

UserId = Annotated[str, Path(min_length=1, max_length=200, pattern=ID_PATTERN)]


class Membership(RequestBody):
    groups: list[Annotated[str, Field(max_length=200, pattern=ID_PATTERN)]] = Field(max_length=1000)


@router.get("")
def members(runtime: RuntimeDep, caller: Admin) -> dict[str, list[str]]:
    """Every user of the tenant with a group: {user: [groups]}."""
    return runtime.groups.members(caller.tenant)



memberships_router = APIRouter(prefix="/ragstore/group-memberships", tags=["permissions"], route_class=Route,
                               responses=ERROR_RESPONSES)


@memberships_router.get("")
def memberships(runtime: RuntimeDep, caller: Admin) -> list[dict[str, str]]:
    """Every membership of the tenant with where it comes from: {user, group, origin ("": set by an administrator;
    source:<kb>/<source>: a source's permission sync, replaced at its next one), addedOn}."""
    return runtime.groups.memberships(caller.tenant)


@router.get("/{user}")
def groups_of(user: UserId, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    return {"user": user, "groups": runtime.groups.of(caller.tenant, user)}


@router.put("/{user}")
def set_groups(user: UserId, body: Membership, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """``user``'s groups are these from now on (the next search reads with them)."""
    return {"user": user, "groups": runtime.groups.set(caller.tenant, user, body.groups)}


kb_router = APIRouter(prefix="/ragstore/rags/{id}", tags=["permissions"], dependencies=[Depends(kb_of_tenant)],
                      route_class=Route, responses=ERROR_RESPONSES)


class Grant(RequestBody):
    principal: str = Field(max_length=300, pattern=GRANTEE_PATTERN)
    access: Literal["VIEW", "EDIT"]


class Sharing(RequestBody):
    grants: list[Grant] = Field(max_length=1000)


@kb_router.get("/grants")
def grants(id: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Who the knowledge base is shared with ({principal: VIEW | EDIT}); empty: the tenant's roles alone decide."""
    return {"kbId": id, "grants": runtime.grants.of(caller.tenant, id)}


@kb_router.put("/grants")
def share(id: str, body: Sharing, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """Share the knowledge base with these users and groups alone (VIEW: query it, read its documents; EDIT: also
    ingest and change it), on top of their tenant roles; an empty list gives it back to the whole tenant."""
    return {"kbId": id, "grants": runtime.grants.set(caller.tenant, id, [g.model_dump() for g in body.grants])}
