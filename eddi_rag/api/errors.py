"""The one place REST maps errors to answers: a product error (``EddiRagError``) answers its status
with its body and headers; FastAPI's request validation 422 and HTTPExceptions answer as
{"error": message} too; anything else is a bug, answered as a 500 with an id to find it in the log.
A face that serves pages (the Manager UI) registers ``app.state.error_page`` to answer its own paths."""

from __future__ import annotations

import logging
import uuid

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from eddi_rag.api.edge import http_error, install_allow_header, install_input_guard, invalid_request
from eddi_rag.errors import EddiRagError

log = logging.getLogger(__name__)


async def answer(request: Request, e: Exception) -> Response:
    """A product error's answer (a page for a Manager page)."""
    assert isinstance(e, EddiRagError)
    page = getattr(request.app.state, "error_page", None)
    if page is not None and (shown := page(request, e.status, str(e))) is not None:
        return shown
    return JSONResponse(e.body(), status_code=e.status, headers=e.headers() or None)


async def _bug(request: Request, e: Exception) -> JSONResponse:
    incident = uuid.uuid4().hex[:12]
    log.error("unexpected error %s on %s %s", incident, request.method, request.url.path, exc_info=e)
    return JSONResponse({"error": f"internal error (logged as {incident})"}, status_code=500)


def install(app: FastAPI) -> None:
    app.add_exception_handler(EddiRagError, answer)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(Exception, _bug)
    install_allow_header(app)
    install_input_guard(app)
