"""Start-up (issue 46, point 4): how soon ``serve`` answers and how long a CLI query takes, over several runs.

    .venv/bin/python benchmarks/bench_startup.py [--runs 7]

A data directory with one ``sqlite`` knowledge base of 20 small documents (the local model). Each run, in a new
process:

- ``eddi-rag serve``: seconds from starting the process until ``/health`` answers 200, then until the Manager's
  first page (``/ui``) has answered, then until the first ``/query`` has answered;
- ``eddi-rag query KB "question"``: the whole command, from start to exit;
- ``python -c "import eddi_rag.api.app"`` and ``import eddi_rag.runtime``: the imports alone.

Prints the median, min and max of each. The goals: ``/health`` within 2 s, ``/ui`` within 1 s after, ``query`` within
1.5 s. Traffic goes to 127.0.0.1 only. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import free_port  # noqa: E402

from eddi_rag.runtime import Runtime  # noqa: E402

EDDI_RAG = [sys.executable, "-m", "eddi_rag.cli"]


def until_answered(url: str, process: subprocess.Popen, method: str = "GET", json: dict | None = None) -> None:
    while True:
        if process.poll() is not None:
            raise SystemExit(f"serve ended: {process.returncode}")
        try:
            if httpx.request(method, url, json=json, timeout=60).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.02)


def served(data: str, kb: str) -> tuple[float, float, float]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    server = subprocess.Popen([*EDDI_RAG, "serve", "--port", str(port), "--data-dir", data], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        until_answered(f"{base}/health", server)
        health = time.perf_counter() - t0
        until_answered(f"{base}/ui", server)
        ui = time.perf_counter() - t0 - health
        until_answered(f"{base}/ragstore/rags/{kb}/query", server, method="POST", json={"query": "vitamin D"})
        first = time.perf_counter() - t0 - health - ui
        return health, ui, first
    finally:
        server.terminate()
        server.wait(timeout=60)


def timed(command: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as data:
        with Runtime(data) as rt:
            kb = rt.resources.create("rags", {"name": "start", "embeddingProvider": "local", "storeType": "sqlite"}).id
            for i in range(20):
                rt.ingest(kb, f"doc{i}.md", f"# Note {i}\n\nVitamin D and bone health, note {i}.")
        for _ in range(args.runs):
            health, ui, first = served(data, kb)
            for what, seconds in (("serve: start until /health answers", health), ("serve: then until /ui answers", ui),
                                  ("serve: then until the first /query answers", first),
                                  ("eddi-rag query KB \"question\" (start to exit)",
                                   timed([*EDDI_RAG, "query", kb, "vitamin D", "--data-dir", data])),
                                  ("python -c 'import eddi_rag.api.app'", timed([sys.executable, "-c", "import eddi_rag.api.app"])),
                                  ("python -c 'import eddi_rag.runtime'", timed([sys.executable, "-c", "import eddi_rag.runtime"]))):
                rows.setdefault(what, []).append(seconds)
    print(f"\n{args.runs} runs each\n\n| what | median s | min s | max s |\n|---|---:|---:|---:|")
    for what, seconds in rows.items():
        print(f"| {what} | {statistics.median(seconds):.2f} | {min(seconds):.2f} | {max(seconds):.2f} |")


if __name__ == "__main__":
    main()
