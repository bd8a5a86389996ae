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


def answering(url: str, process: Any = None, what: str = "the server", seconds: float = 90,
              ok: Callable[[Any], bool] = lambda r: r.status_code == 200) -> None:
    """Return once ``GET url`` answers (``ok`` of the response); fail naming ``what`` if ``process`` (a Popen, or a
    thread) ends first, or ``seconds`` pass. One client for all the looks (``httpx.get`` makes a client, and its TLS
    context, each time: 20-40 ms of CPU a look, taken from the server starting beside it)."""
    import httpx

    with httpx.Client(timeout=5) as client:
        def up() -> bool:
            try:
                if ok(client.get(url)):
                    return True
            except (httpx.TransportError, ValueError):
                pass
            ended = process.poll() is not None if hasattr(process, "poll") else process is not None and not process.is_alive()
            assert not ended, f"{what} ended at start-up"
            return False

        until(up, f"{what} to answer at {url}", seconds, every=0.1)


def ingestion_ended(client: Any, status_url: str, seconds: float = 60) -> dict[str, Any]:
    """The status (``GET status_url``) of an ingestion once it is neither pending nor processing."""
    def ended() -> dict[str, Any] | None:
        status = client.get(status_url).json()
        return status if status["status"] not in ("pending", "processing") else None
    return until(ended, f"the ingestion at {status_url} to end", seconds)


def held(monkeypatch: Any, owner: Any, name: str, seconds: float = 60) -> tuple[Any, Any]:
    """``owner.name`` replaced by one that, called, says so (the first event) and waits for the second before it
    runs: a test does what it must while the call is held in the middle."""
    import threading

    reached, go_on = threading.Event(), threading.Event()
    original = getattr(owner, name)

    def holding(*args: Any, **kwargs: Any) -> Any:
        reached.set()
        assert go_on.wait(seconds), f"{name} held for more than {seconds} s"
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, holding)
    return reached, go_on
