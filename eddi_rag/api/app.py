"""The REST API (FastAPI), composed of one router per area: backends (what is registered), resources (EDDI's
/ragstore/rags and the other kinds the plugin reads), ingestion, retrieval, sources, collections; errors are
mapped to statuses in one place (``errors.py``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
from fastapi import APIRouter, FastAPI, Request
from fastapi_offline import FastAPIOffline
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from eddi_rag.api import errors, health, observability
from eddi_rag.api.edge import ASGIApp, around_requests, document_errors, document_text_rule, include_once
from eddi_rag.api.limits import Limits
from eddi_rag.api.resources import document_schemas, resource_router
from eddi_rag.auth import AuthError
from eddi_rag.auth.http import Authenticator, principal_of
from eddi_rag.auth.oidc import OidcConfig, OidcVerifier
from eddi_rag.resource_types import OLDER_URIS, RESOURCE_TYPES
from eddi_rag.runtime import Runtime
from eddi_rag.ui import handlers as pages
from eddi_rag.verbs.audit import acting
from eddi_rag.version import __version__

DOCUMENTATION = {"/openapi.json", "/docs", "/docs/oauth2-redirect"}
DOCUMENTATION_FILES = "/docs/files"  # Swagger UI's scripts, from the fastapi-offline package: no CDN
MCP_PATH = "/mcp"
# the routers after /health's, in the order their routes are matched (``serve`` imports them when it forks, so its
# processes share them)
ROUTERS = (("backends", "router"), ("ingestion", "router"), ("retrieval", "router"), ("feedback", "kb_router"),
           ("feedback", "feedback_router"), ("sources", "router"), ("collections", "router"), ("keys", "router"),
           ("groups", "router"), ("groups", "memberships_router"), ("groups", "kb_router"), ("agents", "router"),
           ("backup", "router"), ("variables", "router"), ("vault", "router"), ("audit", "router"))


def _routers() -> list[APIRouter]:
    import importlib

    routers = [getattr(importlib.import_module(f"eddi_rag.api.{module}"), router) for module, router in ROUTERS]
    routers += [resource_router(kind) for kind in RESOURCE_TYPES]  # after the KB routes: /ragstore/rags/{id} must
    # not swallow /{id}/query; our older paths before EDDI's (/llmstore/llmconfigs ...)
    routers += [resource_router(kind, (store, collection)) for (_, store, collection), kind in OLDER_URIS.items()]
    return routers


class Declared:
    """Every route but ``/health``'s, declared once (``declare``): at the first request for another path, or in a
    thread as ``serve`` starts (``lazy``), so ``/health`` answers before the routers are imported (0.1 s of a start);
    a request that comes first waits for them, off the event loop."""

    def __init__(self, declare: Callable[[], None]):
        self._declare, self._lock, self.done = declare, threading.Lock(), False

    def ensure(self) -> None:
        if not self.done:
            with self._lock:
                if not self.done:
                    self._declare()
                    self.done = True

    async def before(self, inner: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.done and scope["path"] != "/health":
            await anyio.to_thread.run_sync(self.ensure)
        await inner(scope, receive, send)


def operated(app: FastAPI, runtime: Runtime, role: str, oidc: OidcConfig | None = None) -> None:
    """What the HTTP face of every process has (``serve``, ``worker``): its runtime and role, credentials
    (default: OIDC from EDDI_RAG_OIDC_* variables, and API keys), the one error mapping, metrics and request logs."""
    app.state.runtime, app.state.role = runtime, role
    oidc = oidc or OidcConfig.from_env()
    app.state.auth = Authenticator(runtime.keys, OidcVerifier(oidc) if oidc else None)
    errors.install(app)
    observability.install(app, runtime)


class LazyMcp:
    """``/mcp``, the MCP server over streamable HTTP (``interop.mcp``), built at its first request: importing the MCP
    SDK and building the server took about a second of every start. Its session manager runs in the app's lifespan
    from then on (``serve``, a task of the lifespan's group)."""

    def __init__(self, build: Callable[[], Any], **options: Any):
        """``build``: the MCP server; ``options``: its ``streamable_http_app``'s."""
        self._build, self._options = build, options
        self._app: Any = None

    async def run(self) -> None:
        """Wait for the first request, then build the server and keep its session manager running."""
        self._wanted, self._ready = anyio.Event(), anyio.Event()
        await self._wanted.wait()
        server = self._build()
        app = server.streamable_http_app(**self._options)
        async with server.session_manager.run():
            self._app = app
            self._ready.set()
            await anyio.sleep_forever()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            self._wanted.set()
            await self._ready.wait()
        await self._app(scope, receive, send)


def create_app(runtime: Runtime, max_upload_bytes: int | None = None, oidc: OidcConfig | None = None,
               chat_model: Any = None, limits: Limits | None = None, host: str = "127.0.0.1", worker: bool = True,
               lazy: bool = False, warm: Callable[[], None] | None = None) -> FastAPI:
    """``max_upload_bytes``: the largest document body accepted (default: EDDI_RAG_MAX_UPLOAD_MB, 50 MB).
    ``oidc``: bearer-token verification (default: from EDDI_RAG_OIDC_* variables; none: API keys only).
    ``chat_model``: a LangChain chat model that answers agent turns (none: turns stop before the model).
    ``limits``: per-caller rate and concurrency limits (default: from EDDI_RAG_RATE_LIMIT_* variables).
    ``host``: the address served (on loopback, /mcp refuses other Host headers: DNS rebinding).
    ``worker``: run ingestion jobs, source runs and the scheduler in this process too (a fleet's API replicas
    leave them to ``eddi-rag worker`` processes: ``serve --no-worker``).
    ``lazy``: every route but ``/health``'s declared after the start (``Declared``: ``serve``'s start).
    ``warm``: called in a thread once the routes are declared, before the background work starts (a serving process
    makes the default model's session: ``api.served``)."""
    def mcp_server() -> Any:
        from eddi_rag.interop.mcp import build_server

        return build_server(runtime, lambda headers: app.state.auth.principal_of_headers(headers))

    mcp = LazyMcp(mcp_server, streamable_http_path=MCP_PATH, stateless_http=True, json_response=True, host=host)

    def declare() -> None:
        from eddi_rag.ui import router as ui

        include_once(app, "api", _routers)
        ui.install(app, lambda router: include_once(app, "ui", lambda: [router]))
        app.router.routes.append(Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE"]))  # /mcp (eddi_rag.interop.mcp)

    declared = Declared(declare)

    async def declare_then_work() -> None:
        """The routes declared first, then the background work started: a start with documents queued (``serve --load``)
        embedded them while the Manager's first page waited for its routes (1.09 s after /health, goal 1 s)."""
        if not declared.done:
            await anyio.to_thread.run_sync(declared.ensure)
        if warm is not None:
            await anyio.to_thread.run_sync(warm)
        if worker:
            runtime.start_work()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(mcp.run)
            if declared.done:
                await declare_then_work()
            else:
                tasks.start_soon(declare_then_work)
            yield
            tasks.cancel_scope.cancel()
        runtime.stop_work()

    # /docs as FastAPI's, its scripts served from here (FastAPI's loads them from a CDN: a blank page offline); no /redoc,
    # whose page loads its logo from a CDN
    app = FastAPIOffline(title="eddi-rag", version=__version__, lifespan=lifespan, static_url=DOCUMENTATION_FILES, redoc_url=None)
    app.state.chat_model = chat_model
    app.state.max_upload_bytes = max_upload_bytes or runtime.ingesting.upload_limit()
    app.state.limits = limits or Limits.from_env()
    operated(app, runtime, "serve+worker" if worker else "serve", oidc)

    async def documentation_wants_a_credential(inner: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        """FastAPI's own /openapi.json and /docs, and /mcp: like every endpoint but /health, once auth is on. Every
        request is of a face for the audit record: the Manager's own pages and calls (a page of /ui refers them), MCP,
        else REST; the caller is noted when it is authenticated (auth.http.principal_of)."""
        request = Request(scope, receive)
        referer = request.headers.get("referer", "")
        face = "mcp" if request.url.path == MCP_PATH else "manager" if request.url.path.startswith("/ui") or "/ui" in referer else "rest"
        with acting(face):
            path = request.url.path
            if path in DOCUMENTATION or path.startswith(DOCUMENTATION_FILES + "/") or path == MCP_PATH:
                try:
                    principal_of(request)
                except AuthError as e:
                    await (await errors.answer(request, e))(scope, receive, send)
                    return
            await inner(scope, receive, send)

    around_requests(app, documentation_wants_a_credential)
    pages.install(app)
    app.include_router(health.router)
    if lazy:
        around_requests(app, declared.before)
    else:
        declared.ensure()
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        from eddi_rag.api import collections

        declared.ensure()
        if app.openapi_schema is None:
            document_errors(generate())
            document_schemas(generate())
            collections.document_json_parameters(generate())
            document_text_rule(generate())
        return app.openapi_schema or generate()

    app.openapi = openapi  # type: ignore[method-assign]
    return app
