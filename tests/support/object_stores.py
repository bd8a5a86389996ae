"""Object stores on loopback for the bucket sources' tests, each as a context manager giving its endpoint: moto's S3
server, gcp-storage-emulator (GCS's JSON API, in memory), and Azurite, Microsoft's Azure Storage emulator (installed
from npm by scripts/azurite; in memory, its well-known development account and key)."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.ports import free_port

ACCOUNT = "devstoreaccount1"
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="  # Azurite's documented key
ROOT = Path(__file__).resolve().parents[2]




@contextmanager
def moto_s3() -> Iterator[str]:
    """The endpoint URL of moto's S3 server."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@contextmanager
def gcs_emulator() -> Iterator[str]:
    """The endpoint URL of gcp-storage-emulator's JSON API."""
    from gcp_storage_emulator.server import create_server

    port = free_port()
    server = create_server("127.0.0.1", port, in_memory=True)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


@contextmanager
def azurite() -> Iterator[str]:
    """The account URL (``http://127.0.0.1:<port>/devstoreaccount1``) of an Azurite blob service, stopped afterwards."""
    command = subprocess.run([str(ROOT / "scripts" / "azurite")], check=True, capture_output=True, text=True).stdout.strip()
    port = free_port()
    process = subprocess.Popen([command, "--blobHost", "127.0.0.1", "--blobPort", str(port), "--inMemoryPersistence",
                                "--silent", "--skipApiVersionCheck", "--loose"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"Azurite did not start on port {port}") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/{ACCOUNT}"
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
