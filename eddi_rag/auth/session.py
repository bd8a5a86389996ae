"""Signing in to the UI: the credential (an API key or an OIDC token) is kept in a cookie that
only this server's pages send (HttpOnly, SameSite=Strict); a change a cookie authorises must also
come from this server's own pages (its Origin is checked), so no other site can make one."""

from __future__ import annotations

from urllib.parse import urlsplit

from fastapi import Request

from eddi_rag.auth import AuthError

COOKIE = "eddi_rag_credential"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def cookie_credential(request: Request) -> str:
    """The signed-in credential, or "" (a change it authorises must come from our own origin)."""
    credential = request.cookies.get(COOKIE, "").strip()
    if credential and request.method not in SAFE_METHODS:
        origin = request.headers.get("origin") or request.headers.get("referer") or ""
        if urlsplit(origin).netloc != request.headers.get("host"):
            raise AuthError("a change signed in by cookie must come from this server's own pages (Origin differs)")
    return credential
