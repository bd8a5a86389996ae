"""The HTTP face of ``eddi-rag worker``: no API, no UI; ``/health``, ``/health/ready`` and ``/metrics`` for the
orchestrator. Its lifespan is the worker's: ingestion jobs, source runs and the scheduler start with it; at
shutdown (SIGTERM) the scheduler's role is released, a running job is given back for the next worker, and
source runs under way read CANCELLED."""

from __future__ import annotations

from contextlib import asynccontextmanager

from fastapi import FastAPI

from eddi_rag.api import health
from eddi_rag.api.app import operated
from eddi_rag.auth.oidc import OidcConfig
from eddi_rag.runtime import Runtime
from eddi_rag.version import __version__


def create_worker_app(runtime: Runtime, oidc: OidcConfig | None = None) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        runtime.start_work()
        yield
        runtime.stop_work()

    app = FastAPI(title="eddi-rag worker", version=__version__, lifespan=lifespan, openapi_url=None, docs_url=None, redoc_url=None)
    operated(app, runtime, "worker", oidc)
    app.include_router(health.router)
    return app
