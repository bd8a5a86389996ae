"""What every remote embedding provider gets, whatever its SDK: batches of at most N texts in
order, retries of HTTP 429/5xx and connection failures with exponential backoff (tenacity,
3 attempts), and a check that every vector has the configured dimension."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from eddi_rag.embeddings.model import Embedder, EmbeddingModel
from eddi_rag.errors import CONFIGURATION, EddiRagError

if TYPE_CHECKING:
    from tenacity import Retrying

log = logging.getLogger(__name__)

ATTEMPTS = 3
BACKOFF_SECONDS = 1.0  # first wait; doubles each attempt (tests shorten it)


class EmbeddingDimensionError(EddiRagError, ValueError):
    status = 502
    failure = CONFIGURATION  # the configured dimensions or model


def status_code(exc: BaseException) -> int | None:
    """The HTTP status behind an SDK's exception, wherever that SDK keeps it."""
    for attr in ("status_code", "http_status", "code", "status"):
        value = getattr(exc, attr, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    response = getattr(exc, "response", None)
    if isinstance(response, dict):  # botocore ClientError
        value = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        return value if isinstance(value, int) else None
    value = getattr(response, "status_code", None)
    return value if isinstance(value, int) else None


def is_retryable(exc: BaseException) -> bool:
    code = status_code(exc)
    if code is not None:
        return code == 429 or code >= 500
    name = type(exc).__name__
    return isinstance(exc, (ConnectionError, TimeoutError)) or any(
        word in name for word in ("ConnectError", "ConnectionError", "Timeout", "EndpointConnectionError")
    )


def retrying(what: str, attempts: int = ATTEMPTS) -> Retrying:
    """The retry policy of every remote call: 3 attempts (``attempts``), exponential waits, on 429/5xx/connection errors."""
    from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential  # (off a start's path)

    return Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_exponential(multiplier=BACKOFF_SECONDS, max=30),
        retry=retry_if_exception(is_retryable),
        reraise=True,
        before_sleep=lambda state: log.warning(
            "%s: attempt %d failed (%s), retrying", what, state.attempt_number, state.outcome.exception() if state.outcome else None
        ),
    )


class GuardedEmbeddings(EmbeddingModel):
    def __init__(self, inner: Embedder, provider: str, batch_size: int = 100, dimensions: int | None = None,
                 attempts: int = ATTEMPTS):
        self.inner, self.provider, self.attempts = inner, provider, attempts
        self.batch_size, self.dimensions = batch_size, dimensions
        self.model_name = getattr(inner, "model_name", None) or getattr(inner, "model", None) or getattr(inner, "model_id", None)

    def _call(self, fn: Any, *args: Any) -> Any:
        return retrying(f"{self.provider} embeddings", self.attempts)(fn, *args)

    def _check(self, vectors: list[list[float]], expected_count: int) -> list[list[float]]:
        if len(vectors) != expected_count:
            raise ValueError(f"{self.provider} returned {len(vectors)} vectors for {expected_count} texts")
        for v in vectors:
            if self.dimensions is not None and len(v) != self.dimensions:
                raise EmbeddingDimensionError(
                    f"{self.provider} returned {len(v)}-dimensional vectors but embeddingParameters.dimensions is {self.dimensions}"
                )
        return vectors

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        out: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            out += self._check(self._call(self.inner.embed_documents, batch), len(batch))
        return out

    def embed_query(self, text: str) -> list[float]:
        return self._check([self._call(self.inner.embed_query, text)], 1)[0]
