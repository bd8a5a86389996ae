"""What the Manager's pages raise and how the app answers it: sign in, the auditor's page. Light enough to register
as the app is made (exception handlers must be there before its first request); the pages themselves and the error
pages (``router``) are declared after the start, before any request for a page is answered."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response


class SignInRequired(Exception):
    def __init__(self, next_url: str, message: str = ""):
        self.next_url, self.message = next_url, message


class AuditorsPage(Exception):
    """An auditor reads the audit record and nothing else: every other page sends them there."""


def install(app: FastAPI) -> None:
    """The sign-in and auditor's redirects."""
    @app.exception_handler(AuditorsPage)
    async def auditors_page(request: Request, e: AuditorsPage) -> Response:
        return RedirectResponse("/ui/audit", status_code=303)

    @app.exception_handler(SignInRequired)
    async def sign_in(request: Request, e: SignInRequired) -> Response:
        target = f"/ui/login?next={quote(e.next_url)}" + (f"&error={quote(e.message)}" if e.message else "")
        return RedirectResponse(target, status_code=303)
