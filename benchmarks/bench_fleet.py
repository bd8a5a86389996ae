"""A fleet on one machine (issue 23): ``/query`` throughput and p50/p99 with 1, 2 and 3 ``serve --no-worker``
replicas, and ingestion documents/s with 1 and 2 ``eddi-rag worker``s, all sharing one state on PostgreSQL;
beside them, in the same run, the peer: one ``eddi-rag serve`` on the embedded SQLite state (API and worker
in one process). Every process a separate OS process on loopback; the knowledge bases on the same pgvector
server, embedded by the same local model.

    .venv/bin/python benchmarks/bench_fleet.py [--documents 300] [--queries 400] [--clients 8]

On a 2-core machine the figures show what the shared state costs, not how a fleet scales: three replicas and
the client share the same two cores. Prints a Markdown table; asserts nothing about time."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support: the throwaway PostgreSQL and the fleet's processes

from tests.support.fleet import Fleet  # noqa: E402
from tests.support.services import postgres  # noqa: E402
from tests.support.serving import free_port, wait_until_healthy  # noqa: E402

BASE = "/ragstore/rags"
WORDS = ("harbour", "lantern", "orchard", "granite", "meadow", "copper", "willow", "summit", "ember", "falcon",
         "quartz", "delta", "prairie", "beacon", "canyon", "glacier")


def document(i: int) -> str:
    rng = random.Random(i)
    return "\n\n".join(f"Note {i}.{p}: " + " ".join(rng.choice(WORDS) for _ in range(40)) + "." for p in range(3))


def queries(n: int, seed: int) -> list[str]:
    """Queries of their own per measurement: the embedding cache (shared by the fleet) never answers for a model."""
    rng = random.Random(seed)
    return [f"{rng.randrange(10**6)} " + " ".join(rng.sample(WORDS, 3)) for _ in range(n)]


def knowledge_base(url: str, pg_url: str, name: str) -> str:
    made = httpx.post(f"{url}{BASE}", json={"name": name, "embeddingProvider": "local", "storeType": "pgvector",
                                            "storeParameters": {"url": pg_url}, "minScore": 0}, timeout=60)
    made.raise_for_status()
    return made.headers["location"].split("/")[-1].split("?")[0]


def ingest(urls: list[str], kb: str, documents: int, first: int) -> float:
    """Documents per second, from the first submission until every job completed (documents ``first``… : texts
    of their own per measurement, which no embedding cache holds yet)."""
    start = time.perf_counter()
    with httpx.Client(timeout=60) as http:
        for i in range(first, first + documents):
            http.post(f"{urls[i % len(urls)]}{BASE}/{kb}/ingest?documentName=n{i}.txt", content=document(i).encode()
                      ).raise_for_status()
        while True:
            jobs = http.get(f"{urls[0]}{BASE}/{kb}/ingestions?limit=1000").json()
            if len(jobs) == documents and all(j["status"] == "completed" for j in jobs):
                return documents / (time.perf_counter() - start)
            if failed := [j for j in jobs if j["status"].startswith("failed")]:
                raise RuntimeError(failed[0])
            time.sleep(0.05)


def query_load(urls: list[str], kb: str, texts: list[str], clients: int) -> dict[str, float]:
    """``clients`` threads sending the queries round-robin over ``urls``: requests/s, p50 and p99 in ms."""
    latencies: list[float] = []
    http = httpx.Client(timeout=60, limits=httpx.Limits(max_connections=clients * 2))

    def one(i: int) -> None:
        t = time.perf_counter()
        http.post(f"{urls[i % len(urls)]}{BASE}/{kb}/query", json={"query": texts[i]}).raise_for_status()
        latencies.append((time.perf_counter() - t) * 1000)

    for i in range(min(20, len(texts))):  # warm each replica's model and connections
        one(i)
    latencies.clear()
    start = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, range(len(texts))))
    wall = time.perf_counter() - start
    http.close()
    q = statistics.quantiles(latencies, n=100)
    return {"rps": len(texts) / wall, "p50": q[49], "p99": q[98]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--documents", type=int, default=300)
    parser.add_argument("--queries", type=int, default=400)
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    env = {"EDDI_RAG_RATE_LIMIT_INGEST": "100000/minute", "EDDI_RAG_RATE_LIMIT_QUERY": "100000/minute"}
    rows: list[tuple[str, str, float | None, float | None, float | None]] = []
    with postgres() as pg_url, tempfile.TemporaryDirectory(prefix="eddi-rag-bench-fleet-") as tmp:
        folder = Path(tmp)
        # the peer: one process, API and worker, the embedded SQLite state
        port = free_port()
        peer_log = open(folder / "peer.log", "ab")  # noqa: SIM115
        peer = subprocess.Popen([sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(port), "--data-dir",
                                 str(folder / "peer"), "--log-format", "text"], cwd=ROOT, env={**os.environ, **env},
                                stdout=peer_log, stderr=subprocess.STDOUT)
        peer_url = f"http://127.0.0.1:{port}"
        try:
            wait_until_healthy(peer_url, peer)
            kb = knowledge_base(peer_url, pg_url, "peer")
            rows.append(("one process, SQLite state (the peer)", "ingestion, 1 in-process worker", ingest([peer_url], kb, args.documents, 0),
                         None, None))
            load = query_load([peer_url], kb, queries(args.queries, 0), args.clients)
            rows.append(("one process, SQLite state (the peer)", "/query, 1 process", load["rps"], load["p50"], load["p99"]))
        finally:
            peer.terminate()
            peer.wait(timeout=60)

        fleet = Fleet(pg_url, folder, **env)
        try:
            urls = [fleet.start("serve", f"serve-{i}") for i in (1, 2, 3)]
            fleet.start("worker", "worker-1")
            fleet.wait_ready("serve-1", "serve-2", "serve-3", "worker-1")
            kb = knowledge_base(urls[0], pg_url, "fleet-1")
            rows.append(("fleet, PostgreSQL state", "ingestion, 1 worker", ingest(urls, kb, args.documents, 100_000), None, None))
            fleet.start("worker", "worker-2")
            fleet.wait_ready("worker-2")
            kb2 = knowledge_base(urls[0], pg_url, "fleet-2")
            rows.append(("fleet, PostgreSQL state", "ingestion, 2 workers", ingest(urls, kb2, args.documents, 200_000), None, None))
            for n in (1, 2, 3):
                load = query_load(urls[:n], kb, queries(args.queries, n), args.clients)
                rows.append(("fleet, PostgreSQL state", f"/query, {n} replica{'s' * (n > 1)}", load["rps"], load["p50"], load["p99"]))
        finally:
            fleet.close()

    cores = os.cpu_count()
    print(f"\n{args.documents} documents (3 paragraphs each), {args.queries} queries from {args.clients} client threads, "
          f"{cores} cores\n")
    print("| setup | measure | documents/s or requests/s | p50 ms | p99 ms | vs the peer |")
    print("|---|---|---|---|---|---|")
    peer_ingest, peer_query = rows[0][2], rows[1][2]
    for setup, measure, rate, p50, p99 in rows:
        peer_rate = peer_ingest if measure.startswith("ingestion") else peer_query
        ratio = f"{rate / peer_rate:.2f}×" if rate and peer_rate else ""
        print(f"| {setup} | {measure} | {rate:.1f} | {'' if p50 is None else f'{p50:.0f}'} | "
              f"{'' if p99 is None else f'{p99:.0f}'} | {ratio} |")


if __name__ == "__main__":
    main()
