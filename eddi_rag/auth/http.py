"""Who is calling over HTTP, for every face that serves it (REST, the Manager UI, MCP): the
credential from the Authorization / X-API-Key header or the UI's sign-in cookie, the ``Principal``
it gives, the role a route needs, and the tenant check of a resource it names."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Protocol

from fastapi import Depends, Request

from eddi_rag.auth import AUDITOR, ROLES, TRUSTED, AuthError, ForbiddenError, Principal
from eddi_rag.auth.keys import PREFIX
from eddi_rag.auth.oidc import OidcVerifier
from eddi_rag.auth.session import cookie_credential
from eddi_rag.records.audit import ACTING


def credential(headers: Mapping[str, str] | None) -> str:
    """The API key or OIDC token a request's headers carry (Authorization: Bearer, or X-API-Key), or ""."""
    headers = {k.lower(): v for k, v in (headers or {}).items()}
    scheme, _, value = headers.get("authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else headers.get("x-api-key", "").strip()


class KeyCheck(Protocol):
    """What authentication asks of the API keys (``auth.keys.KeyStore``, or the keys verb over it)."""

    def any(self) -> bool: ...
    def authenticate(self, key: str) -> Principal: ...


class Authenticator:
    """Auth is on once a key exists or OIDC is configured; until then every caller is TRUSTED."""

    def __init__(self, keys: KeyCheck, oidc: OidcVerifier | None = None):
        self.keys, self.oidc = keys, oidc

    def enabled(self) -> bool:
        return self.oidc is not None or self.keys.any()

    def principal(self, request: Request) -> Principal:
        """The caller of a request: its header's credential, else the Manager UI's sign-in cookie."""
        if not self.enabled():
            return TRUSTED
        return self.principal_for(credential(request.headers) or cookie_credential(request))

    def principal_of_headers(self, headers: Mapping[str, str] | None) -> Principal:
        """The caller of an MCP request (headers None on stdio: trusted, as the CLI)."""
        return self.principal_for(credential(headers)) if self.enabled() else TRUSTED

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
        noted = ACTING.get()
        if noted.face != "python":  # a request's own record (the face set it): whose it is, for the audit record
            noted.who.update(who(request.state.principal))
    return request.state.principal


def who(principal: Principal) -> dict[str, Any]:
    """A caller as the audit record names it: never a secret (a key by its id)."""
    found = {"user": principal.user_id, "role": principal.role, "key": principal.subject if principal.subject.startswith("key ") else None,
             "subject": None if principal.subject.startswith("key ") else principal.subject or None,
             "groups": list(principal.groups) or None, "actsForUsers": principal.acts_for_users or None}
    return {k: v for k, v in found.items() if v is not None}


def check_role(principal: Principal, role: str, doing: str = "do this") -> None:
    if role == AUDITOR:
        if not principal.allows(AUDITOR):
            raise ForbiddenError(f"role {principal.role!r} may not {doing}; the audit record is read by auditors and "
                                 "administrators alone")
        return
    if principal.role not in ROLES:
        raise ForbiddenError(f"this token grants none of the roles {', '.join('eddi-' + r for r in ROLES)}, so it may not "
                             f"{doing}; it needs {'eddi-' + role!r} or above")
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
Auditor = Annotated[Principal, Depends(require(AUDITOR))]
