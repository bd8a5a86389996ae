"""Every core serving (issue 46, point 2): REST ``/query`` from ``eddi-rag serve --processes N`` against the machine's
limit.

    .venv/bin/python benchmarks/bench_processes.py [--docs 1000] [--clients 8] [--seconds 20] [--processes 1 2]

A data directory with ``--docs`` NFCorpus documents in a ``sqlite`` knowledge base with every default (the local
model), then, for each N, ``eddi-rag serve --processes N`` started on 127.0.0.1 with the rate limits off:

- one query's time alone: one client, one query after another (the median);
- the machine's limit: its cores over that time (queries/s if every core did nothing but answer);
- ``--clients`` clients querying for ``--seconds``: queries/s, p50/p95, and that throughput over the limit;
- memory: the proportional set size (PSS: a page shared by k processes counts 1/k to each) of ``serve``'s processes,
  the one that started the others included, summed, after the load.

The clients run in this process (httpx, one thread each) on the same cores. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import clients, free_port  # noqa: E402
from bench_spine import DEFAULT_CORPUS, load_texts  # noqa: E402

from eddi_rag.ingest.pipeline import Document  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402
from eddi_rag.stores.base import Chunk  # noqa: E402

CONFIG = {"name": "load", "embeddingProvider": "local", "storeType": "sqlite"}


def pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            total += next(int(line.split()[1]) for line in f if line.startswith("Pss:"))
    return total / 1024


def alone(base: str, kb: str, seconds: float) -> float:
    """The median ms of one query after another from one client."""
    latencies, _, _ = clients(base, kb, 1, seconds)
    return statistics.median(latencies)


def loaded(base: str, kb: str, n: int, seconds: float) -> tuple[float, float, float, int]:
    """(queries/s, p50 ms, p95 ms, errors) of ``n`` clients querying for ``seconds`` (bench_load's clients)."""
    latencies, requests, errors = clients(base, kb, n, seconds)
    latencies.sort()
    return requests / seconds, statistics.median(latencies), latencies[int(0.95 * len(latencies))], errors


def synthetic(rt: Runtime, kb: str, texts: list[str], n: int) -> int:
    """``n`` chunks written into ``kb``'s store (a document of 10 chunks each), their HNSW graph built and saved."""
    rng = np.random.default_rng(46)
    store = rt.stores.get(kb, rt.rag_config(kb))
    for start in range(0, n, 5000):
        vectors = rng.standard_normal((min(5000, n - start), 384)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        store.upsert([Chunk(f"c{start + i}", texts[(start + i) % len(texts)][:1000],
                            {"document_id": f"d{(start + i) // 10}", "source": f"d{(start + i) // 10}.md", "position_in_doc": (start + i) % 10},
                            v.tolist()) for i, v in enumerate(vectors)])
    store.search(vectors[0].tolist(), 5)  # (builds the graph, saved beside the file for the serving processes)
    return n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--synthetic", type=int, default=0,
                        help="Instead: this many chunks written straight into the store, NFCorpus texts with random unit "
                             "vectors (memory at a size the local model would take an hour to embed); the graph built once")
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    rows = []
    with tempfile.TemporaryDirectory() as data:
        with Runtime(data) as rt:
            kb = rt.resources.create("rags", CONFIG).id
            if args.synthetic:
                chunks = synthetic(rt, kb, load_texts(args.corpus, args.synthetic), args.synthetic)
            else:
                chunks = rt.ingesting.batch([Document(f"doc{i}.md", t) for i, t in enumerate(load_texts(args.corpus, args.docs))],
                                            kb).chunk_count
        env = {**os.environ, "EDDI_RAG_RATE_LIMIT_QUERY": "none", "EDDI_RAG_MAX_CONCURRENT": "1000"}
        for n in args.processes:
            port = free_port()
            server = subprocess.Popen([sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(port), "--data-dir", data,
                                       "--processes", str(n)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            base = f"http://127.0.0.1:{port}"
            try:
                for _ in range(600):
                    try:
                        if httpx.get(f"{base}/health").status_code == 200:
                            break
                    except httpx.HTTPError:
                        time.sleep(0.1)
                loaded(base, kb, 2 * n, 3)  # every process warm: its model and the KB's rows loaded
                one = alone(base, kb, args.seconds / 2)
                rate, p50, p95, errors = loaded(base, kb, args.clients, args.seconds)
                memory = pss_mb([server.pid, *(p.pid for p in psutil.Process(server.pid).children())])  # (the starting one too)
                limit = cores / one * 1000
                rows.append((n, one, limit, rate, p50, p95, errors, memory))
            finally:
                server.terminate()
                server.wait(timeout=60)
    what = f"{chunks} synthetic chunks (NFCorpus texts, random vectors)" if args.synthetic else f"{args.docs} NFCorpus documents ({chunks} chunks)"
    print(f"\n{what}, every default, {cores} cores, {args.clients} clients\n")
    print("| processes | one query alone (ms) | machine's limit (q/s) | queries/s | p50 ms | p95 ms | × limit | errors | PSS of the serving processes (MB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, one, limit, rate, p50, p95, errors, memory in rows:
        print(f"| {n} | {one:.1f} | {limit:.0f} | {rate:.0f} | {p50:.0f} | {p95:.0f} | {rate / limit:.2f} | {errors} | {memory:.0f} |")


if __name__ == "__main__":
    main()
