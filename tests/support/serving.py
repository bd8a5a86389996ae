"""A real ``eddi-rag serve`` process for the tests: started on a free loopback port, ready once /health answers."""

from __future__ import annotations

import subprocess

from tests.support.waiting import answering


def wait_until_healthy(url: str, process: subprocess.Popen, seconds: float = 90) -> None:
    """Return once ``url``/health answers 200; fail if ``process`` ends or ``seconds`` pass first."""
    answering(f"{url}/health", process, "the server", seconds)
