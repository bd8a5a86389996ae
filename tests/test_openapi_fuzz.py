"""`schemathesis run --checks all` against the real server on 127.0.0.1 (issue 12): every operation
of the OpenAPI document, a fixed seed and a bounded number of examples, 0 failures. Generated
requests go to this server only; its outbound guard allows no private network."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import uvicorn

from eddi_rag.api.app import create_app
from eddi_rag.api.limits import Limits
from eddi_rag.outbound import OutboundPolicy
from eddi_rag.runtime import Runtime

CONFIG = Path(__file__).parent / "support" / "schemathesis.toml"


def test_schemathesis_finds_nothing(tmp_path):
    runtime = Runtime(tmp_path, outbound=OutboundPolicy())
    _, secret = runtime.keys.create("default", "admin", name="schemathesis")  # auth on from the start
    kb = runtime.resources.create("rags", {"name": "fuzzed", "embeddingProvider": "local", "storeType": "sqlite"}).id
    runtime.ingest(kb, "trains.md", "# Trains\n\nThe night train to Vienna leaves at 22:10.")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = create_app(runtime, limits=Limits({"query": [], "ingest": []}, 1_000))  # the limits have their own tests
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        while not server.started:
            time.sleep(0.05)
        st = shutil.which("st", path=str(Path(sys.executable).parent))
        assert st, "schemathesis is in the dev extra: scripts/setup installs it"
        result = subprocess.run(
            [st, "--no-color", "--config-file", str(CONFIG), "run", f"http://127.0.0.1:{port}/openapi.json", "--checks", "all",
             "--max-examples", "10", "--seed", "1", "-H", f"Authorization: Bearer {secret}"],
            capture_output=True, text=True, timeout=900, env={**os.environ, "EDDI_RAG_FUZZ_KB": kb})
        (tmp_path / "schemathesis.txt").write_text(result.stdout)
        assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
        assert "Authentication failed" not in result.stdout  # every operation was reached with the key
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        runtime.close()
