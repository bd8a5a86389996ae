"""Per-caller rate and concurrency limits on the expensive routes: searching (query, context,
retrieve, an agent's turn) and ingesting (uploads, documents). Over a limit: 429 with Retry-After.

The caller is the credential's subject (an API key's id, a token's subject) or, with auth off, the
client's address. Limits (moving windows, the `limits` package, in this process's memory):

* ``EDDI_RAG_RATE_LIMIT_QUERY`` (default ``6000/minute``), ``EDDI_RAG_RATE_LIMIT_INGEST`` (``600/minute``);
  any of the `limits` notations, e.g. ``20/second;1000/hour``; ``none`` turns a limit off;
* ``EDDI_RAG_MAX_CONCURRENT`` (default 16): requests of one caller on these routes at once.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

from fastapi import Depends, Request
from limits import RateLimitItem, parse_many
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

from eddi_rag.auth import TRUSTED
from eddi_rag.auth.http import principal_of
from eddi_rag.errors import EddiRagError

DEFAULTS = {"query": "6000/minute", "ingest": "600/minute"}
DEFAULT_CONCURRENT = 16


class TooManyRequestsError(EddiRagError, RuntimeError):
    """A caller over a rate or concurrency limit (HTTP 429 with Retry-After)."""
    status = 429

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}


def _rates(kind: str) -> list[RateLimitItem]:
    variable = f"EDDI_RAG_RATE_LIMIT_{kind.upper()}"
    raw = os.environ.get(variable, DEFAULTS[kind]).strip()
    if raw.lower() == "none":
        return []
    try:
        return parse_many(raw)
    except ValueError as e:
        raise ValueError(f"{variable}: {e} (e.g. 600/minute or 20/second;1000/hour)") from None


def _concurrent() -> int:
    raw = os.environ.get("EDDI_RAG_MAX_CONCURRENT", str(DEFAULT_CONCURRENT))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"EDDI_RAG_MAX_CONCURRENT must be a positive whole number, got {raw!r}")
    return int(raw)


@dataclass
class Limits:
    rates: dict[str, list[RateLimitItem]]
    concurrent: int
    limiter: MovingWindowRateLimiter = field(default_factory=lambda: MovingWindowRateLimiter(MemoryStorage()))
    running: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def from_env(cls) -> Limits:
        return cls({kind: _rates(kind) for kind in DEFAULTS}, _concurrent())

    def admit(self, kind: str, caller: str) -> None:
        for rate in self.rates[kind]:
            if not self.limiter.hit(rate, kind, caller):
                reset = self.limiter.get_window_stats(rate, kind, caller).reset_time
                raise TooManyRequestsError(f"rate limit: at most {rate} {kind} requests per caller",
                                           max(1, math.ceil(reset - time.time())))
        with self.lock:
            if self.running[caller] >= self.concurrent:
                raise TooManyRequestsError(f"at most {self.concurrent} requests per caller at once", 1)
            self.running[caller] += 1

    def release(self, caller: str) -> None:
        with self.lock:
            self.running[caller] -= 1
            if self.running[caller] <= 0:
                del self.running[caller]


def caller_of(request: Request) -> str:
    principal = principal_of(request)
    if principal is not TRUSTED and principal.subject:
        return f"{principal.tenant}/{principal.subject}"
    return f"address:{request.client.host if request.client else 'unknown'}"  # auth off


def limited(kind: str):
    """A route dependency: admit the caller under ``kind``'s limits for the request's duration."""
    def dependency(request: Request) -> Iterator[None]:
        limits: Limits = request.app.state.limits
        caller = caller_of(request)
        limits.admit(kind, caller)
        try:
            yield
        finally:
            limits.release(caller)
    return Depends(dependency)


QueryLimit = limited("query")
IngestLimit = limited("ingest")
