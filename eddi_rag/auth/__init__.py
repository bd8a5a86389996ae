"""Who may do what: API keys (stored hashed) and OIDC bearer tokens give a ``Principal`` — a
tenant, a role (viewer < editor < admin, as EDDI's eddi-viewer / eddi-editor / eddi-admin) and
optionally a user. Auth is on as soon as a key exists or OIDC is configured; in-process callers
(the Python API, the LlmTask hook) never pass through it."""

from __future__ import annotations

from dataclasses import dataclass

from eddi_rag.common.principals import NOBODY, Reader
from eddi_rag.common.roles import AUDITOR, ROLES, KeyRole
from eddi_rag.resource_types import DEFAULT_TENANT

__all__ = ["AUDITOR", "DEFAULT_TENANT", "ROLES", "TRUSTED", "KeyRole", "AuthError", "ForbiddenError", "Principal"]

from eddi_rag.errors import EddiRagError


class AuthError(EddiRagError):
    """No credential, or a bad one (HTTP 401)."""
    status = 401

    def headers(self) -> dict[str, str]:
        return {"WWW-Authenticate": "Bearer"}


class ForbiddenError(EddiRagError):
    """A credential whose role or binding does not allow this (HTTP 403)."""
    status = 403


@dataclass(frozen=True)
class Principal:
    tenant: str
    role: str  # one of ROLES, or "none": a valid token granting none of them (EDDI's eddi-user alone: 403, not 401)
    user_id: str | None = None  # retrieves as this user; None: shared chunks only (unless acting for users)
    acts_for_users: bool = False  # may name any user (the agent runtime's service credential)
    subject: str = ""  # key id or token subject, for logs
    groups: tuple[str, ...] = ()  # the bound user's groups, as the credential carries them (a key's, a token's claim)
    email: str | None = None  # the bound user's e-mail, only when verified (an OIDC token's email_verified)

    def allows(self, role: str) -> bool:
        """Whether this credential's role is ``role`` or above (``none``, a token granting none of the roles, never is); the
        audit record (``auditor``) is read by auditors and administrators alone."""
        if role == AUDITOR:
            return self.role in (AUDITOR, "admin")
        return self.role in ROLES and ROLES.index(self.role) >= ROLES.index(role)

    def user_for(self, requested: str | None) -> str | None:
        """The user a request retrieves or ingests as: a bound user always; another user only for
        credentials that act for users."""
        if self.acts_for_users:
            return requested
        if requested is not None and requested != self.user_id:
            raise ForbiddenError(f"this credential may not act for user {requested!r}"
                                 + (f" (it is bound to {self.user_id!r})" if self.user_id else ""))
        return self.user_id

    def searcher(self, requested: str | None) -> str | None:
        """The user a search reads as: ``user_for``'s, and for an administrator of the tenant also any user it names
        (the Manager's Try it "as" a user: what that user gets and what is withheld); an administrator still ingests
        as its own user only."""
        if requested is not None and self.allows("admin"):
            return requested
        return self.user_for(requested)

    def reader_for(self, requested: str | None) -> Reader:
        """Whose permissions a search reads with (retrieval.access): the bound user with the credential's groups and
        verified e-mail; a user named by a credential acting for users, with the group directory's groups; nobody
        verified otherwise. Never what a request body says about groups."""
        user = self.searcher(requested)
        if user is None:
            return NOBODY
        if self.user_id is not None and user == self.user_id:
            return Reader(user, self.groups, self.email)
        return Reader(user)


TRUSTED = Principal(DEFAULT_TENANT, "admin", None, True, "in-process")  # auth off: everything, one tenant
