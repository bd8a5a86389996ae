"""Top-5 search latency and recall@10 of every embedded/local store backend, side by side.

Same vectors (384-d, unit length), same queries, one run. Recall@10 is measured against exact
search (brute-force cosine in numpy). pgvector runs on a throwaway PostgreSQL (PyPI pgserver)
with its HNSW index (bulk-loaded, then indexed); qdrant in qdrant-client's local mode; chroma
and typesense on real local servers started the way the tests start them.

    .venv/bin/python benchmarks/bench_stores.py [--n 100000] [--queries 100] [--backends ...]

Prints a table; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from eddi_rag.backends import registry
from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import Chunk, StoreContext

BACKENDS = ["in-memory", "sqlite", "sqlite-vec", "pgvector", "qdrant", "chroma", "typesense"]
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support.services


def synthetic(n: int, dim: int, rng: np.random.Generator, kind: str = "low-rank") -> np.ndarray:
    """``low-rank``: clusters on a 32-d manifold mapped into ``dim`` (text embeddings have a low
    intrinsic dimension); ``isotropic``: clusters with full-rank noise, a worst case for HNSW."""
    if kind == "low-rank":
        basis = np.random.default_rng(0).standard_normal((32, dim)).astype(np.float32)
        centers = np.random.default_rng(1).standard_normal((200, 32)).astype(np.float32)
        z = centers[rng.integers(0, 200, n)] + 0.5 * rng.standard_normal((n, 32)).astype(np.float32)
        x = z @ basis + 0.05 * rng.standard_normal((n, dim)).astype(np.float32)
    else:
        centers = np.random.default_rng(1).standard_normal((200, dim)).astype(np.float32)
        x = centers[rng.integers(0, 200, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--backends", nargs="+", default=BACKENDS)
    parser.add_argument("--data", choices=["low-rank", "isotropic"], default="low-rank")
    args = parser.parse_args()

    rng = np.random.default_rng(7)
    data = synthetic(args.n, args.dim, rng, args.data)
    queries = synthetic(args.queries, args.dim, rng, args.data)
    ids = [f"c{i:07d}" for i in range(args.n)]
    exact = [set(np.argsort(-(data @ q), kind="stable")[:10].tolist()) for q in queries]
    chunks = [Chunk(ids[i], f"text {i}", {"source": f"d{i % 100}"}, data[i]) for i in range(args.n)]

    rows = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as services:
        ctx = StoreContext(Database(Path(tmp) / "bench.db"), Path(tmp))
        for name in args.backends:
            params: dict = {}
            if name == "pgvector":
                from tests.support.services import postgres

                params = {"url": services.enter_context(postgres()), "index": "none"}  # bulk load, then build HNSW once
            elif name == "qdrant":
                params = {"path": ":memory:"}
            elif name in ("chroma", "typesense"):
                import tests.support.services as started

                params = services.enter_context(getattr(started, name)())
            store = registry.load(registry.STORES, name)(f"bench-{uuid.uuid4().hex[:6]}", params, ctx)
            t0 = time.perf_counter()
            for start in range(0, args.n, 5000):
                store.upsert(chunks[start : start + 5000])
            if name == "pgvector":
                store.create_index()
            load_s = time.perf_counter() - t0
            store.search(queries[0], 5)  # warm caches
            lat, hits = [], 0
            for q, truth in zip(queries, exact):
                t0 = time.perf_counter()
                store.search(q, 5)
                lat.append((time.perf_counter() - t0) * 1000)
                hits += len({int(h.id[1:]) for h in store.search(q, 10)} & truth)
            lat.sort()
            rows.append((name, statistics.median(lat), lat[int(len(lat) * 0.95) - 1], hits / (10 * len(queries)), load_s))
            store.drop()
            print(f"  measured {name}", flush=True)

    base = rows[0][1]
    print(f"\n## Top-5 search, {args.n:,} chunks × {args.dim}-d ({args.data}), {args.queries} queries (recall@10 vs exact)")
    print(f"| backend | median ms | p95 ms | × {rows[0][0]} median | recall@10 | load s |\n|---|---|---|---|---|---|")
    for name, med, p95, recall, load_s in rows:
        print(f"| {name} | {med:.2f} | {p95:.2f} | {med / base:.1f} | {recall:.3f} | {load_s:.1f} |")


if __name__ == "__main__":
    main()
