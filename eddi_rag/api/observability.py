"""What operators see: ``GET /metrics`` (Prometheus text) and one log record per request.

Metrics: request latency per route (``eddi_rag_http_request_seconds``), ingestion jobs by state,
chunks per knowledge base, the share of retrieving LLM turns that were RAG misses, and the
library's own (eddi_rag.common.metrics: search latency per store, turns by outcome, embedding-cache
lookups). Each request is logged on the ``eddi_rag.requests`` logger with method, route, status,
milliseconds and caller as fields (``eddi-rag serve --log-format json`` writes them as JSON lines).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from starlette.types import Message, Receive, Scope, Send

from eddi_rag.api.deps import readable
from eddi_rag.api.edge import ASGIApp, around_requests
from eddi_rag.auth import Principal
from eddi_rag.auth.http import require
from eddi_rag.common import metrics
from eddi_rag.resource_types import parse_uri
from eddi_rag.runtime import Runtime
from eddi_rag.verbs.search import WithheldError

log = logging.getLogger("eddi_rag.requests")


class RuntimeCollector(Collector):
    """Figures read from the runtime at scrape time, of the knowledge bases the scraping credential may view (its
    tenant's, those shared with named users and groups only when it is among them): another tenant's names, ids and
    counts are never shown."""

    def __init__(self, runtime: Runtime, caller: Principal):
        self.runtime, self.caller = runtime, caller

    def collect(self) -> Iterator[GaugeMetricFamily]:
        kbs = [id for id in (parse_uri(d.resource).id for d in self.runtime.knowledge_bases.every(self.caller.tenant))
               if self.runtime.grants.may(self.caller, id, "VIEW")]
        jobs = GaugeMetricFamily("eddi_rag_ingestion_jobs", "Ingestion jobs by state (failed: any reason), of the knowledge "
                                 "bases the credential may view.", labels=["state"])
        restricted, withheld = {}, set()  # what the credential may read of each KB that reads by permissions
        for kb_id in kbs:
            try:
                if (node := readable(self.runtime, kb_id, self.caller)) is not None:
                    restricted[kb_id] = node
            except WithheldError:
                withheld.add(kb_id)
        counted = [kb_id for kb_id in kbs if kb_id not in withheld]
        for state, count in self.runtime.ingesting.job_counts(counted, restricted).items():
            jobs.add_metric([state], count)
        yield jobs
        chunks = GaugeMetricFamily("eddi_rag_kb_chunks", "Chunks stored per knowledge base the credential may view (unreachable "
                                   "stores, and those read by permissions, left out).",
                                   labels=["kb", "name", "store"])
        for kb_id, name, store_type, count in self.runtime.health.chunk_counts(kbs):
            chunks.add_metric([kb_id, name, store_type], count)
        yield chunks
        turns = {s.labels["outcome"]: s.value for m in metrics.RAG_TURNS.collect() for s in m.samples if s.name.endswith("_total")}
        misses = sum(s.value for m in metrics.RAG_MISSES.collect() for s in m.samples if s.name.endswith("_total"))
        searched = turns.get("context", 0) + turns.get("miss", 0)
        yield GaugeMetricFamily("eddi_rag_rag_miss_ratio", "Share of retrieving LLM turns that were RAG misses: no passage passed, "
                                "or the answer said nothing was found (since start).", value=misses / searched if searched else 0.0)


def install(app: FastAPI, runtime: Runtime) -> None:
    registry = CollectorRegistry(auto_describe=True)
    latency = Histogram("eddi_rag_http_request_seconds", "HTTP requests by method, route template and status.",
                        ["method", "route", "status"], registry=registry)

    async def observe(inner: ASGIApp, scope: Scope, receive: Receive, send: Send) -> None:
        start = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await inner(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - start
            request = Request(scope)
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            latency.labels(request.method, route, str(status)).observe(seconds)
            principal = getattr(request.state, "principal", None)
            log.info("%s %s %s %.1f ms", request.method, request.url.path, status, seconds * 1000, extra={
                "method": request.method, "path": request.url.path, "route": route, "status": status,
                "ms": round(seconds * 1000, 2), "caller": getattr(principal, "subject", None)})

    around_requests(app, observe)

    @app.get("/metrics", include_in_schema=False)
    def prometheus(request: Request) -> Response:
        caller = require("viewer")(request)  # like every endpoint but /health once auth is on
        figures = CollectorRegistry(auto_describe=True)
        figures.register(RuntimeCollector(runtime, caller))
        return Response(generate_latest(registry) + generate_latest(figures) + generate_latest(metrics.REGISTRY),
                        media_type=CONTENT_TYPE_LATEST)


def log_requests(log_format: str) -> None:
    """One record per request on stderr: JSON lines (python-json-logger) or text."""
    from pythonjsonlogger.json import JsonFormatter

    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter("%(asctime)s %(levelname)s %(name)s %(message)s") if log_format == "json"
                         else logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    requests = logging.getLogger("eddi_rag.requests")
    requests.addHandler(handler)
    requests.setLevel(logging.INFO)
    requests.propagate = False
