"""The one way the tests wait for a condition: poll it, bounded (a hung server fails the test, slowly, naming what
it waited for); no fixed sleeps standing in for a condition."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def until(check: Callable[[], T], what: str = "the condition", seconds: float = 120, every: float = 0.05) -> T:
    """``check()``'s first true value, polled every ``every`` seconds for at most ``seconds``."""
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, f"still waiting for {what} after {seconds} s"
        time.sleep(every)
    return found


def ingestion_ended(client: Any, status_url: str, seconds: float = 60) -> dict[str, Any]:
    """The status (``GET status_url``) of an ingestion once it is neither pending nor processing."""
    def ended() -> dict[str, Any] | None:
        status = client.get(status_url).json()
        return status if status["status"] not in ("pending", "processing") else None
    return until(ended, f"the ingestion at {status_url} to end", seconds)
