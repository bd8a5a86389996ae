"""What every request body and parameter passes before a route sees it: JSON bodies only as JSON
(415 otherwise), within the upload limit (413), strict JSON (no NaN, Infinity or numbers too large
for a float: 400 naming the field), and validation errors that name the field and never echo what
cannot be serialised."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable
from typing import Any, get_args

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.params import File, Form
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute, APIRouter
from pydantic import BaseModel, ConfigDict, model_validator
from starlette.datastructures import MutableHeaders
from starlette.exceptions import HTTPException
from starlette.routing import BaseRoute
from starlette.types import Message, Receive, Scope, Send

from eddi_rag.api.uploads import BadUploadError, read_body
from eddi_rag.common import jsonvalues
from eddi_rag.common.principals import ACL_PATTERN, PRINCIPAL_PATTERN
from eddi_rag.errors import EddiRagError


class RequestBody(BaseModel):
    """A request body: types as JSON Schema means them, nothing coerced (``1`` is not ``true``, ``"5"``
    not ``5``; ``5.0`` is the integer 5)."""

    model_config = ConfigDict(strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integral_floats(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        ints = {name for name, f in cls.model_fields.items() if f.annotation is int or int in get_args(f.annotation)}
        return {k: int(v) if k in ints and isinstance(v, float) and v.is_integer() and abs(v) < 2**63 else v for k, v in data.items()}


class ErrorBody(BaseModel):
    """Every error's answer: ``error`` says what is wrong and names the field or value."""

    error: str
    errors: list[dict[str, Any]] | None = None  # a configuration's: [{path, message, value}]
    detail: list[dict[str, Any]] | None = None  # a request's (422): [{loc, msg, type}]
    currentVersion: int | None = None  # a version conflict's (409)


ERROR_STATUSES = {400: "Bad input (the message names the field)", 401: "No or an invalid credential",
                  403: "The credential's role may not do this", 404: "Not found (or another tenant's)",
                  409: "Conflict with the current state", 413: "Body over the upload limit",
                  415: "Unsupported content type", 422: "Request does not match this operation's schema",
                  429: "Over a rate, concurrency or queue limit (see Retry-After)", 503: "A store, a provider or the state database is unavailable"}
# Every router documents every error status it can answer with (one table; errors.py maps errors to them), as a
# reference to ErrorBody's schema (``document_errors`` adds it once): named by ``model``, FastAPI builds a validating
# field per route and status, 1,500 of them, most of the app's start-up.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    code: {"description": text, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}}
    for code, text in ERROR_STATUSES.items()}


def document_errors(spec: dict[str, Any]) -> None:
    """ErrorBody's schema among the OpenAPI document's components, where ERROR_RESPONSES refer to it."""
    schema = ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}", mode="serialization")
    for field in schema["properties"].values():
        field.pop("default", None)  # (as FastAPI writes a response's model: what an answer holds, no defaults)
    spec.setdefault("components", {}).setdefault("schemas", {})["ErrorBody"] = schema


class UnsupportedMediaTypeError(EddiRagError, ValueError):
    """A body in a content type the route does not take (HTTP 415)."""
    status = 415


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


# what a pattern a person types against means, said instead of the regular expression (issue 67: a reader typed as
# "finance" was answered with the principals' pattern)
PRINCIPALS = ("is no principal: use user:<id>, group:<id>, email:<address>, public or link:organization, or deny: before "
              "one of them (e.g. group:finance)")
SAID_PATTERNS = {PRINCIPAL_PATTERN: PRINCIPALS, ACL_PATTERN: "is no list of principals: separate user:<id>, group:<id>, "
                 "email:<address>, public or link:organization (or deny: before one) by commas, e.g. group:finance,user:bob"}


def _said(err: dict[str, Any]) -> str:
    """An error's message; a pattern a person types against, said in words with what was typed (80 characters)."""
    meaning = SAID_PATTERNS.get((err.get("ctx") or {}).get("pattern", "")) if err.get("type") == "string_pattern_mismatch" else None
    given = err.get("input")
    return f"{given[:80]!r} {meaning}" if meaning and isinstance(given, str) else str(err.get("msg", ""))


EDDI_400 = ("/secretstore/", "/variablestore/")  # EDDI answers a malformed request there with 400 (docs/rest.md)


async def invalid_request(request: Request, e: Exception) -> JSONResponse:
    """FastAPI's 422 with each error's field, message and type (the offending input is left out:
    it may be anything, e.g. bytes); 400 on EDDI's vault and variables paths, as EDDI answers."""
    assert isinstance(e, RequestValidationError)
    errors = [{"loc": list(err.get("loc", ())), "msg": _said(err), "type": err.get("type", "")} for err in e.errors()]
    message = "; ".join(f"{_field(err['loc'])}: {err['msg']}" for err in errors)
    return JSONResponse({"error": message, "detail": errors}, status_code=400 if request.url.path.startswith(EDDI_400) else 422)


async def http_error(_: Request, e: Exception) -> Response:
    """Starlette's and our HTTPExceptions answer as every other error does: {"error": message}."""
    assert isinstance(e, HTTPException)
    if e.status_code == 405:
        return Response(status_code=405, headers=e.headers)  # its Allow header is set by allow_header below
    return JSONResponse({"error": str(e.detail)}, status_code=e.status_code, headers=e.headers)


ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def around_requests(app: FastAPI, handle: Callable[[ASGIApp, Scope, Receive, Send], Awaitable[None]]) -> None:
    """``handle(inner, scope, receive, send)`` around every HTTP request, as plain ASGI middleware: Starlette's
    ``@app.middleware("http")`` costs a task and a memory stream per request and layer (four layers took 0.8 ms of a
    2.7 ms request). Added like it: the last added is the outermost."""
    class Layer:
        def __init__(self, inner: ASGIApp):
            self.inner = inner

        async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await self.inner(scope, receive, send)
            else:
                await handle(self.inner, scope, receive, send)

    app.add_middleware(Layer)


def install_input_guard(app: FastAPI) -> None:
    """Every operation refuses a path, query parameter or parameter name holding a lone surrogate or a
    control character (400 naming where; the value is never quoted). JSON bodies are checked by
    ``strict_json``, multipart file names by ``uploads.read_multipart``."""
    async def text_only(inner: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        wrong = jsonvalues.text_problem(request.url.path, "the path", name=True)
        for name, value in request.query_params.multi_items():
            wrong = (wrong or jsonvalues.text_problem(name, "a query parameter's name", name=True)
                     or jsonvalues.text_problem(value, f"query parameter {name!r}"))
        if wrong:
            await JSONResponse({"error": wrong}, status_code=400)(scope, receive, send)
        else:
            await inner(scope, receive, send)

    around_requests(app, text_only)


_CONTROL = "\\x00-\\x08\\x0b\\x0c\\x0e-\\x1f\\x7f"  # what text may not hold (jsonvalues); names: no tab or line break either
TEXT = f"^[^{_CONTROL}]*$"
NAME = "^[^\\x00-\\x1f\\x7f]*$"
# Patterns the API's own schemas use, each with the text rule folded in.
_WITH_RULE = {"\\S": f"^[^{_CONTROL}]*[^\\s{_CONTROL}][^{_CONTROL}]*$", "^https?://": f"^https?://[^{_CONTROL}]*$"}
JSON_VALUE = {"anyOf": [{"type": "string", "pattern": TEXT}, {"type": ["number", "boolean", "null"]},
                        {"type": "array", "items": {"$ref": "#/components/schemas/JsonValue"}},
                        {"type": "object", "propertyNames": {"pattern": NAME},
                         "additionalProperties": {"$ref": "#/components/schemas/JsonValue"}}]}


def document_text_rule(spec: dict[str, Any]) -> None:
    """The OpenAPI document says what the input guard refuses: every string a request carries (path and
    query parameters, JSON bodies, their keys) matches a pattern without control characters, and a body
    part of any type is a ``JsonValue`` (JSON whose strings and keys hold none)."""
    spec.setdefault("components", {}).setdefault("schemas", {})["JsonValue"] = JSON_VALUE

    def walk(node: Any, rule: str = TEXT) -> Any:
        if not isinstance(node, dict):
            return node
        if node == {} or set(node) <= {"title", "description"}:  # any JSON value
            return {**node, "$ref": "#/components/schemas/JsonValue"}
        declared = node.get("type")
        types: list[Any] = declared if isinstance(declared, list) else [declared]
        if "string" in types and "enum" not in node and "const" not in node and node.get("format") != "binary":
            if "pattern" not in node:
                node["pattern"] = rule
            elif node["pattern"] in _WITH_RULE:
                node["pattern"] = _WITH_RULE[node["pattern"]]
        if "object" in types or "properties" in node:
            node.setdefault("propertyNames", {"pattern": NAME})
            if node.get("additionalProperties", True) is True:
                node["additionalProperties"] = {"$ref": "#/components/schemas/JsonValue"}
        for key in ("properties", "$defs", "definitions", "patternProperties"):
            if isinstance(node.get(key), dict):
                node[key] = {k: walk(v) for k, v in node[key].items()}
        for key in ("items", "additionalProperties", "not", "contains"):
            if isinstance(node.get(key), dict):
                node[key] = walk(node[key])
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            if isinstance(node.get(key), list):
                node[key] = [walk(v) for v in node[key]]
        return node

    for name, schema in spec["components"]["schemas"].items():
        if name != "JsonValue":
            walk(schema)
    for item in spec.get("paths", {}).values():
        for op in item.values():
            if not isinstance(op, dict):
                continue
            for parameter in op.get("parameters", []):
                if "schema" in parameter:
                    walk(parameter["schema"], NAME if parameter.get("in") == "path" else TEXT)
                for media in (parameter.get("content") or {}).values():
                    walk(media.get("schema"))
            for media in ((op.get("requestBody") or {}).get("content") or {}).values():
                if isinstance(media.get("schema"), dict):
                    walk(media["schema"])


def install_allow_header(app: FastAPI) -> None:
    """A 405 names every method the path takes, as the OpenAPI document lists them (Starlette
    names only its first matching route's)."""
    def routes(within: list[BaseRoute] | None = None) -> list[APIRoute]:
        out = []
        for route in app.router.routes if within is None else within:  # an included router keeps its routes (prefix
            inner = getattr(route, "original_router", None)  # applied) in original_router, which may include others
            if inner is not None:
                out += routes(inner.routes)
            elif isinstance(route, APIRoute) and route.include_in_schema:
                out.append(route)
        return out

    def allowed(path: str) -> set[str]:
        matching = [r for r in routes() if r.path_regex.match(path)]
        # the most specific: /ragstore/rags/descriptors, not …/{id}; /secretstore/secrets/{t}/reset, not …/{t}/{key}
        fewest = min((len(r.param_convertors) for r in matching), default=0)
        return {m for r in matching if len(r.param_convertors) == fewest for m in (r.methods or ())}

    async def allow_header(inner: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 405:
                MutableHeaders(scope=message)["Allow"] = ", ".join(sorted(allowed(Request(scope).url.path)))
            await send(message)

        await inner(scope, receive, sending)

    around_requests(app, allow_header)


_INCLUDED: dict[str, BaseRoute] = {}
_INCLUDING = threading.Lock()


def include_once(app: FastAPI, area: str, routers: Callable[[], list[APIRouter]]) -> None:
    """``routers`` in ``app`` as ``app.include_router`` would include them, included once a process for every app of
    ``area``: FastAPI builds an included route's handler at the first request of each inclusion (0.11-0.15 s of every
    app made, 96-164 routes: a test suite makes hundreds). The routes read the app's state from the request; the app's
    ``dependency_overrides`` do not reach them (none are used)."""
    with _INCLUDING:
        if area not in _INCLUDED:
            holder, every = APIRouter(), APIRouter()
            for router in routers():
                every.include_router(router)
            holder.include_router(every)
            _INCLUDED[area] = holder.routes[-1]
    app.router.routes.append(_INCLUDED[area])
    app.router._mark_routes_changed()
