"""The REST API over a runtime of its own, through FastAPI's test client (the real app, no port)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime


@contextlib.contextmanager
def app_client(data_dir: Path, **app_args: Any) -> Iterator[TestClient]:
    """A client of the app over a runtime in ``data_dir``; ``client.runtime`` is that runtime."""
    runtime = Runtime(data_dir)
    try:
        with TestClient(create_app(runtime, **app_args)) as client:
            client.runtime = runtime  # type: ignore[attr-defined]  # for what a test checks beside the API
            yield client
    finally:
        runtime.close()
