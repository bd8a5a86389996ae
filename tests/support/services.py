"""Real services the tests start themselves (and stop afterwards)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL 16 + pgvector 0.6 server (PyPI pgserver); yields its URI."""
    import pgserver

    with tempfile.TemporaryDirectory(prefix="eddi-rag-pg-") as folder:
        server = pgserver.get_server(folder, cleanup_mode="stop")
        try:
            yield server.get_uri()
        finally:
            server.cleanup()
