"""Load on loopback (issue 12): `eddi-rag serve`'s app under uvicorn on 127.0.0.1, N clients.

1. query only: N clients send `POST /ragstore/rags/{id}/query` for ``--seconds``;
2. query during ingest: the same, while one more client uploads documents one after another
   (each waited for until its ingestion completes).

Prints throughput, p50/p95/p99 latency and errors per phase; asserts nothing about time. Traffic
goes to 127.0.0.1 only and stops after ``--seconds`` per phase.

    .venv/bin/python benchmarks/bench_load.py [--clients 8] [--seconds 30] [--docs 200]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_spine import DEFAULT_CORPUS, load_texts  # noqa: E402

from eddi_rag.api.app import create_app  # noqa: E402
from eddi_rag.api.limits import Limits  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402

QUESTIONS = ["vitamin D and bone health", "statins side effects", "dietary fiber and colon cancer", "omega-3 fatty acids",
             "processed meat risks", "green tea antioxidants", "sugar and diabetes", "exercise and depression"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(runtime: Runtime) -> Iterator[str]:
    """The app under uvicorn on a free port of 127.0.0.1, in a thread of this process, without rate limits (the
    server is measured, not the limiter); yields its base URL and stops it afterwards."""
    limits = Limits({"query": [], "ingest": []}, 10_000)
    server = uvicorn.Server(uvicorn.Config(create_app(runtime, limits=limits), host="127.0.0.1", port=(port := free_port()),
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def clients(base: str, kb: str, n: int, seconds: float) -> tuple[list[float], int, int]:
    """(latencies in ms, requests, errors) of n clients querying for ``seconds``."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def run(i: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            j = i
            while time.monotonic() < stop:
                t0 = time.perf_counter()
                try:
                    ok = http.post(f"/ragstore/rags/{kb}/query", json={"query": QUESTIONS[j % len(QUESTIONS)]}).status_code == 200
                except httpx.HTTPError:
                    ok = False
                ms = (time.perf_counter() - t0) * 1000
                with lock:
                    latencies.append(ms)
                    errors[0] += not ok
                j += 1

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, len(latencies), errors[0]


def ingester(base: str, kb: str, texts: list[str], stop: threading.Event, report: dict) -> None:
    done = failed = chunks = 0
    with httpx.Client(base_url=base, timeout=60) as http:
        for i, text in enumerate(texts):
            if stop.is_set():
                break
            job = http.post(f"/ragstore/rags/{kb}/ingest", params={"documentName": f"load-{i}.txt"}, content=text.encode())
            if job.status_code != 202:
                failed += 1
                continue
            status_url = f"/ragstore/rags/{kb}/ingestion/{job.json()['ingestionId']}/status"
            while (status := http.get(status_url).json())["status"] in ("pending", "processing"):
                time.sleep(0.05)
            if status["status"] == "completed":
                done, chunks = done + 1, chunks + (status["chunks"] or 0)
            else:
                failed += 1
    report.update(done=done, failed=failed, chunks=chunks)


def summary(name: str, latencies: list[float], requests: int, errors: int, seconds: float) -> str:
    latencies.sort()
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] if latencies else float("nan")  # noqa: E731
    return (f"| {name} | {requests / seconds:.1f} | {statistics.median(latencies):.0f} | {pick(0.95):.0f} | {pick(0.99):.0f} "
            f"| {errors} of {requests} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--docs", type=int, default=200, help="NFCorpus documents in the KB before the load")
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    texts = load_texts(args.corpus, 2 * args.docs)
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(tmp)
        kb = runtime.resources.create("rags", {"name": "load", "embeddingProvider": "local", "storeType": "sqlite"}).id
        for i, text in enumerate(texts[: args.docs]):
            runtime.ingest(kb, f"doc-{i}.txt", text)
        with serving(runtime) as base:
            print(f"\n{args.clients} clients, {args.seconds:.0f} s per phase, KB of {args.docs} documents "
                  f"({runtime.stores.get(kb, runtime.rag_config(kb)).count()} chunks)\n")
            print("| phase | requests/s | p50 ms | p95 ms | p99 ms | errors |\n|---|---:|---:|---:|---:|---:|")
            print(summary("query only", *clients(base, kb, args.clients, args.seconds), args.seconds), flush=True)
            stop, report = threading.Event(), {}
            feeding = threading.Thread(target=ingester, args=(base, kb, texts[args.docs:], stop, report))
            feeding.start()
            result = clients(base, kb, args.clients, args.seconds)
            stop.set()
            feeding.join()
            print(summary("query during ingest", *result, args.seconds))
            print(f"\ningestions beside the queries: {json.dumps(report)}")
        runtime.close()


if __name__ == "__main__":
    main()
