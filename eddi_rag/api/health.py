"""What a load balancer and an orchestrator ask every process (``serve`` and ``worker``), without a credential:
``/health`` (liveness: the process answers; restart it when it does not) and ``/health/ready`` (readiness: it
reaches the state database, and a worker's threads run; send it traffic, or count it, only then: 503 otherwise)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from eddi_rag import __version__
from eddi_rag.api.edge import Route

router = APIRouter(route_class=Route)


@router.get("/health")
def health() -> dict[str, Any]:
    return {"status": "ok", "version": __version__}


@router.get("/health/ready")
def ready(request: Request) -> JSONResponse:
    runtime, role = request.app.state.runtime, request.app.state.role
    body: dict[str, Any] = {"role": role, "state": runtime.db.dialect, "worker": runtime.jobs.working(),
                            "scheduler": runtime.scheduler.leading}
    try:
        runtime.db.query("SELECT 1")
    except Exception as e:  # noqa: BLE001 - whatever keeps the state out of reach, the process is not ready
        return JSONResponse({**body, "status": "unavailable", "error": f"state database: {runtime.resolver.redact(str(e))}"}, 503)
    if role != "serve" and not runtime.jobs.working():  # (a worker, or serve with its worker)
        return JSONResponse({**body, "status": "unavailable", "error": "the ingestion worker is not running"}, 503)
    return JSONResponse({**body, "status": "ready"})
