"""OpenTelemetry, opt-in (docs/audit.md): with ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``…_TRACES_ENDPOINT``) set, each
retrieval is a span as the GenAI semantic conventions name it (status: Development): name and ``gen_ai.operation.name``
``retrieval``, ``gen_ai.data_source.id`` the knowledge base, ``gen_ai.retrieval.top_k`` (and the older
``gen_ai.request.top_k``), and, only with ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``,
``gen_ai.retrieval.documents`` (each chunk's id and score). Each call of an embedding model (a cache's misses) is an
``embeddings {model}`` span (``gen_ai.operation.name`` ``embeddings``, ``gen_ai.provider.name``,
``gen_ai.request.model``, ``gen_ai.embeddings.dimension.count``). Exported by the SDK's OTLP exporter, configured by the
standard ``OTEL_*`` variables. Unset, nothing of OpenTelemetry is imported and nothing is exported."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

_lock = threading.Lock()
_tracer: Any = None
_looked = False


def use(provider: Any) -> None:
    """Spans go to ``provider`` (a ``TracerProvider``; None: none), whatever the environment says (tests, embedding)."""
    global _tracer, _looked
    with _lock:
        _tracer, _looked = (provider.get_tracer("eddi-rag") if provider is not None else None), True


def reset() -> None:
    """Look at the environment again at the next span (tests)."""
    global _tracer, _looked
    with _lock:
        _tracer, _looked = None, False


def tracer() -> Any:
    """The tracer spans are made with; None (nothing imported) unless an OTLP endpoint is configured."""
    global _tracer, _looked
    if _looked:
        return _tracer
    with _lock:
        if not _looked:
            if os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
                from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
                from opentelemetry.sdk.resources import Resource
                from opentelemetry.sdk.trace import TracerProvider
                from opentelemetry.sdk.trace.export import BatchSpanProcessor

                provider = TracerProvider(resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "eddi-rag")}))
                provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
                _tracer = provider.get_tracer("eddi-rag")
            _looked = True
    return _tracer


def capturing() -> bool:
    """Whether document ids and scores go on spans (the GenAI conventions' content opt-in)."""
    return os.environ.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "").lower() in ("true", "1", "yes")


@contextmanager
def retrieval(data_source: str, top_k: int | None) -> Iterator[Any]:
    """A retrieval span around the block (None inside when telemetry is off); its status ERROR when the block raises."""
    traced = tracer()
    if traced is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {"gen_ai.operation.name": "retrieval", "gen_ai.data_source.id": data_source}
    if top_k is not None:
        attributes.update({"gen_ai.retrieval.top_k": top_k, "gen_ai.request.top_k": top_k})
    with traced.start_as_current_span("retrieval", kind=SpanKind.INTERNAL, attributes=attributes) as span:
        yield span


def documents(span: Any, found: Sequence[Any]) -> None:
    """The chunks a retrieval gave, on its span (only when capturing)."""
    if span is not None and capturing():
        span.set_attribute("gen_ai.retrieval.documents", json.dumps([{"id": h.id, "score": round(h.score, 6)} for h in found]))


@contextmanager
def embeddings(provider: str, model: str | None, remote: bool) -> Iterator[Any]:
    """An embeddings span around one call of a model (None inside when telemetry is off): CLIENT for a remote API,
    INTERNAL for a model in this process."""
    traced = tracer()
    if traced is None:
        yield None
        return
    from opentelemetry.trace import SpanKind

    attributes = {"gen_ai.operation.name": "embeddings", "gen_ai.provider.name": provider, **({"gen_ai.request.model": model} if model else {})}
    with traced.start_as_current_span(f"embeddings {model}" if model else "embeddings", attributes=attributes,
                                      kind=SpanKind.CLIENT if remote else SpanKind.INTERNAL) as span:
        yield span


class TracedEmbeddings:
    """An embedding model whose every call is an embeddings span (``embeddings``); nothing added when telemetry is off."""

    def __init__(self, inner: Any, provider: str, model: str | None, remote: bool):
        self.inner, self.provider, self.model, self.remote = inner, provider, model, remote

    def __getattr__(self, name: str) -> Any:  # (model_name, dimensions … of the model inside)
        return getattr(self.inner, name)

    def _traced(self, call: Any, *args: Any) -> Any:
        with embeddings(self.provider, self.model, self.remote) as span:
            found = call(*args)
            if span is not None and found:
                first = found if isinstance(found[0], float) else found[0]
                span.set_attribute("gen_ai.embeddings.dimension.count", len(first))
            return found

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._traced(self.inner.embed_documents, texts)

    def embed_query(self, text: str) -> list[float]:
        return self._traced(self.inner.embed_query, text)
