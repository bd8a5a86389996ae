"""One place maps the product's errors to HTTP statuses."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from eddi_rag.api.edge import (
    UnsupportedMediaTypeError,
    http_error,
    install_allow_header,
    install_input_guard,
    invalid_request,
)
from eddi_rag.api.limits import TooManyRequestsError
from eddi_rag.api.uploads import BadUploadError, PayloadTooLargeError
from eddi_rag.auth import AuthError, ForbiddenError
from eddi_rag.collections import CollectionExistsError, CollectionNotFoundError, CollectionRequestError
from eddi_rag.config import ConfigValidationError
from eddi_rag.eddi_import import ExportError
from eddi_rag.embeddings.references import EmbeddingDisabledError
from eddi_rag.ingest.jobs import JobNotRetryableError, QueueFullError
from eddi_rag.ingest.loaders import UnreadableDocumentError, UnsupportedFileTypeError
from eddi_rag.pipeline import InvalidQueryError, VectorDBUnavailableError
from eddi_rag.registry import ProviderUnavailableError, UnknownProviderError
from eddi_rag.resources import ResourceNotFoundError, VersionConflictError
from eddi_rag.secrets import SecretNotFoundError
from eddi_rag.sources.folder import FolderNotAllowedError
from eddi_rag.sources.sync import SourceBusyError, SourceNotFoundError
from eddi_rag.stores.base import DimensionMismatchError, StoreUnavailableError
from eddi_rag.stores.filters import FilterError
from eddi_rag.workflow.llm_task import NoLlmTaskError

# Errors whose answer is {"error": message}, and their status. A subclass answers as its base.
STATUS: dict[type[Exception], int] = {
    ResourceNotFoundError: 404, SourceNotFoundError: 404, CollectionNotFoundError: 404,
    FilterError: 400, InvalidQueryError: 400, ExportError: 400, BadUploadError: 400, FolderNotAllowedError: 400, CollectionRequestError: 400,
    NoLlmTaskError: 400,
    AuthError: 401, ForbiddenError: 403,
    SourceBusyError: 409, CollectionExistsError: 409, JobNotRetryableError: 409, EmbeddingDisabledError: 409,
    # a stored configuration that cannot be used as it stands: the message names what to set or change
    SecretNotFoundError: 409, UnknownProviderError: 409, DimensionMismatchError: 409,
    PayloadTooLargeError: 413,
    QueueFullError: 429, TooManyRequestsError: 429,
    UnsupportedFileTypeError: 415, UnsupportedMediaTypeError: 415,
    UnreadableDocumentError: 422,
    VectorDBUnavailableError: 503, StoreUnavailableError: 503, ProviderUnavailableError: 503,
}


def status_of(error: Exception) -> int:
    return next(STATUS[c] for c in type(error).__mro__ if c in STATUS)


async def answer(request: Request, e: Exception) -> Response:
    """The {"error": message} answer of an error in the table (a Manager page gets a page)."""
    status = status_of(e)
    from eddi_rag.ui.router import error_page, is_page  # the UI imports the API's dependencies

    if is_page(request):
        return error_page(request, status, str(e))
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if hasattr(e, "retry_after"):
        headers = {"Retry-After": str(e.retry_after)}
    return JSONResponse({"error": str(e)}, status_code=status, headers=headers)


async def _conflict(_: Request, e: Exception) -> JSONResponse:
    assert isinstance(e, VersionConflictError)
    return JSONResponse({"error": str(e), "currentVersion": e.current}, status_code=409)


async def _invalid(_: Request, e: Exception) -> JSONResponse:
    assert isinstance(e, ConfigValidationError)
    return JSONResponse({"error": "invalid configuration", "errors": e.errors}, status_code=400)


def install(app: FastAPI) -> None:
    app.add_exception_handler(VersionConflictError, _conflict)
    app.add_exception_handler(ConfigValidationError, _invalid)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(HTTPException, http_error)
    install_allow_header(app)
    install_input_guard(app)
    for error in STATUS:
        app.add_exception_handler(error, answer)
