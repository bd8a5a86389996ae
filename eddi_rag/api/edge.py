"""What every request body and parameter passes before a route sees it: JSON bodies only as JSON
(415 otherwise), within the upload limit (413), strict JSON (no NaN, Infinity or numbers too large
for a float: 400 naming the field), and validation errors that name the field and never echo what
cannot be serialised."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import Request
from fastapi.exceptions import RequestValidationError
from fastapi.params import File, Form
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute

from eddi_rag import jsonvalues
from eddi_rag.api.uploads import BadUploadError, read_body


class UnsupportedMediaTypeError(ValueError):
    """A body in a content type the route does not take (HTTP 415)."""


def strict_json(data: bytes, what: str = "body") -> Any:
    """``data`` parsed as standard JSON; BadUploadError (400) names what is wrong and where."""
    try:
        value = json.loads(data)
    except RecursionError:
        raise BadUploadError(f"{what}: nested more than {jsonvalues.MAX_DEPTH} levels deep") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise BadUploadError(f"{what}: not valid JSON ({e})") from None
    wrong = jsonvalues.problem(value, what)
    if wrong:
        raise BadUploadError(wrong)
    return value


def is_json(content_type: str) -> bool:
    kind = content_type.split(";", 1)[0].strip().lower()
    return kind == "application/json" or (kind.startswith("application/") and kind.endswith("+json"))


class Route(APIRoute):
    """A route whose JSON body is read within the upload limit and parsed strictly before
    FastAPI validates it (FastAPI then uses the parsed value)."""

    def get_route_handler(self) -> Callable[[Request], Any]:
        handler = super().get_route_handler()
        takes_json = self.body_field is not None and not isinstance(self.body_field.field_info, (Form, File))
        if not takes_json:
            return handler

        async def strict(request: Request) -> Response:
            content_type = request.headers.get("content-type", "")
            data = await read_body(request, request.app.state.max_upload_bytes)
            if data:
                if content_type and not is_json(content_type):
                    raise UnsupportedMediaTypeError(f"Content-Type: this endpoint takes application/json, not {content_type}")
                request._json = strict_json(data)  # what Request.json() returns from now on
            request._body = data
            return await handler(request)

        return strict


def _field(loc: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in loc) or "request"


async def invalid_request(_: Request, e: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 with each error's field, message and type (the offending input is left out:
    it may be anything, e.g. bytes)."""
    errors = [{"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")} for err in e.errors()]
    message = "; ".join(f"{_field(err['loc'])}: {err['msg']}" for err in errors)
    return JSONResponse({"error": message, "detail": errors}, status_code=422)
