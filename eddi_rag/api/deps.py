"""What routes take from the app: the Runtime, and the caller's Principal at the role a route needs."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Query, Request

from eddi_rag.auth import TRUSTED, AuthError, ForbiddenError, Principal
from eddi_rag.auth.keys import PREFIX, KeyStore
from eddi_rag.auth.oidc import OidcVerifier
from eddi_rag.resources import ResourceNotFoundError
from eddi_rag.runtime import Runtime
from eddi_rag.ui.session import cookie_credential


def get_runtime(request: Request) -> Runtime:
    return request.app.state.runtime


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]

MAX_VERSION = 2**31 - 1
MAX_OFFSET = 10**9
# Integer query parameters, range-checked (422 naming the parameter) before they reach SQL.
Version = Annotated[int, Query(ge=0, le=MAX_VERSION, description="a version number; 0: the current one")]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET, description="how many items to skip")]


class Authenticator:
    """Auth is on once a key exists or OIDC is configured; until then every caller is TRUSTED."""

    def __init__(self, keys: KeyStore, oidc: OidcVerifier | None = None):
        self.keys, self.oidc = keys, oidc

    def enabled(self) -> bool:
        return self.oidc is not None or self.keys.any()

    def principal(self, request: Request) -> Principal:
        if not self.enabled():
            return TRUSTED
        header = request.headers.get("authorization", "")
        scheme, _, credential = header.partition(" ")
        credential = credential.strip() if scheme.lower() == "bearer" else request.headers.get("x-api-key", "").strip()
        credential = credential or cookie_credential(request)  # the Manager UI's sign-in
        return self.principal_for(credential)

    def principal_for(self, credential: str) -> Principal:
        if not credential:
            raise AuthError("a credential is required: Authorization: Bearer <API key or OIDC token>")
        if credential.startswith(PREFIX + "_") or self.oidc is None:
            return self.keys.authenticate(credential)
        return self.oidc.authenticate(credential)


def principal_of(request: Request) -> Principal:
    """The caller, authenticated once per request."""
    if not hasattr(request.state, "principal"):
        request.state.principal = request.app.state.auth.principal(request)
    return request.state.principal


def own(runtime: Runtime, caller: Principal, kind: str, id: str) -> None:
    """Another tenant's resource does not exist for the caller: 404, as for a missing one."""
    if runtime.resources.tenant_of(kind, id) != caller.tenant:
        raise ResourceNotFoundError(f"{kind}/{id} not found")


def kb_of_tenant(id: str, request: Request) -> None:
    """Router dependency for /ragstore/rags/{id}/...: the knowledge base must be the caller's tenant's."""
    own(get_runtime(request), principal_of(request), "rags", id)


def check_role(principal: Principal, role: str, doing: str = "do this") -> None:
    if not principal.allows(role):
        raise ForbiddenError(f"role {principal.role!r} may not {doing}; it needs {role!r} or above")


def require(role: str):
    def dependency(request: Request) -> Principal:
        principal = principal_of(request)
        check_role(principal, role)
        return principal
    return dependency


Viewer = Annotated[Principal, Depends(require("viewer"))]
Editor = Annotated[Principal, Depends(require("editor"))]
Admin = Annotated[Principal, Depends(require("admin"))]
