"""What a load balancer and an orchestrator ask every process (``serve`` and ``worker``), without a credential:
``/health`` (liveness: the process answers; restart it when it does not) and ``/health/ready`` (readiness: it
reaches the state database, and a worker's threads run; send it traffic, or count it, only then: 503 otherwise)."""

from __future__ import annotations

import os
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse

from eddi_rag.api.edge import Route
from eddi_rag.version import __version__

router = APIRouter(route_class=Route)


# (its response documented by hand, not inferred from the annotation: inferring it imports pydantic.v1, which FastAPI
# checks annotations against, 14 ms of the time until /health answers; the document is the same)
@router.get("/health", response_model=None, responses={200: {"description": "Successful Response", "content": {
    "application/json": {"schema": {"additionalProperties": True, "type": "object", "title": "Response Health Health Get"}}}}})
def health() -> dict[str, Any]:
    """``process``: the id of the process that answered (one of several with ``serve --processes``)."""
    return {"status": "ok", "version": __version__, "process": os.getpid()}


@router.get("/health/ready")
def ready(request: Request) -> JSONResponse:
    ready, body = request.app.state.runtime.readiness(request.app.state.role)
    return JSONResponse(body, 200 if ready else 503)
