"""OIDC bearer tokens (EDDI runs behind Keycloak): a JWT verified against a JWKS URL (signature,
issuer, audience, expiry; PyJWT), its role, tenant and user read from configurable claims.

Environment: ``EDDI_RAG_OIDC_JWKS_URL`` (turns OIDC on), ``EDDI_RAG_OIDC_ISSUER``,
``EDDI_RAG_OIDC_AUDIENCE``, ``EDDI_RAG_OIDC_ROLES_CLAIM`` (default ``realm_access.roles``, a dotted
path; the highest of eddi-admin / eddi-editor / eddi-viewer, or admin / editor / viewer, wins; a valid token with none of
them, e.g. EDDI's eddi-user alone, is who it says but may do nothing here: 403, as EDDI answers),
``EDDI_RAG_OIDC_TENANT_CLAIM`` (default ``tenant``; absent: the default tenant),
``EDDI_RAG_OIDC_USER_CLAIM`` (default ``sub``), ``EDDI_RAG_OIDC_SERVICE_ROLE`` (default
``eddi-service``: a token with it acts for users), ``EDDI_RAG_OIDC_GROUPS_CLAIM`` (default ``groups``, Keycloak's and
Entra's: the user's groups, which its searches read with), ``EDDI_RAG_OIDC_EMAIL_CLAIM`` (default ``email``: the
user's e-mail, taken only when the token's ``email_verified`` is true)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from eddi_rag.auth import DEFAULT_TENANT, ROLES, AuthError, Principal


def _claim(claims: dict[str, Any], path: str) -> Any:
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


@dataclass(frozen=True)
class OidcConfig:
    jwks_url: str
    issuer: str | None = None
    audience: str | None = None
    roles_claim: str = "realm_access.roles"
    tenant_claim: str = "tenant"
    user_claim: str = "sub"
    service_role: str = "eddi-service"
    groups_claim: str = "groups"
    email_claim: str = "email"

    @classmethod
    def from_env(cls) -> OidcConfig | None:
        url = os.environ.get("EDDI_RAG_OIDC_JWKS_URL")
        if not url:
            return None
        env = os.environ.get
        return cls(url, env("EDDI_RAG_OIDC_ISSUER"), env("EDDI_RAG_OIDC_AUDIENCE"),
                   env("EDDI_RAG_OIDC_ROLES_CLAIM", "realm_access.roles"), env("EDDI_RAG_OIDC_TENANT_CLAIM", "tenant"),
                   env("EDDI_RAG_OIDC_USER_CLAIM", "sub"), env("EDDI_RAG_OIDC_SERVICE_ROLE", "eddi-service"),
                   env("EDDI_RAG_OIDC_GROUPS_CLAIM", "groups"), env("EDDI_RAG_OIDC_EMAIL_CLAIM", "email"))


class OidcVerifier:
    def __init__(self, config: OidcConfig):
        from jwt import PyJWKClient

        self.config = config
        self.jwks = PyJWKClient(config.jwks_url, cache_keys=True, lifespan=300, timeout=10)

    def authenticate(self, token: str) -> Principal:
        import jwt

        c = self.config
        try:
            key = self.jwks.get_signing_key_from_jwt(token).key
            claims = jwt.decode(token, key, algorithms=["RS256", "RS384", "RS512", "ES256", "ES384", "PS256"],
                                audience=c.audience, issuer=c.issuer,
                                options={"require": ["exp"], "verify_aud": c.audience is not None,
                                         "verify_iss": c.issuer is not None})
        except jwt.PyJWTError as e:
            raise AuthError(f"invalid bearer token: {e}") from e
        roles = _claim(claims, c.roles_claim) or []
        roles = [roles] if isinstance(roles, str) else list(roles)
        granted = [r for r in ROLES if r in roles or f"eddi-{r}" in roles] or ["none"]  # valid, but no role: 403s
        tenant = _claim(claims, c.tenant_claim) or DEFAULT_TENANT
        user = _claim(claims, c.user_claim)
        service = c.service_role in roles
        groups = _claim(claims, c.groups_claim) or []
        groups = [groups] if isinstance(groups, str) else [str(g).lstrip("/") for g in groups if isinstance(g, (str, int))]
        email = _claim(claims, c.email_claim) if claims.get("email_verified") is True else None  # an unverified one never
        return Principal(str(tenant), granted[-1], None if service else (str(user) if user else None), service,
                         f"token {claims.get('sub', '?')}", () if service else tuple(groups),
                         str(email) if email and not service else None)
