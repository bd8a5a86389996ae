"""What the retriever's scope filter costs on the embedded stores, against the same search unfiltered.

Every retrieval carries a filter (shared or this user's chunks, not expired: see
eddi_rag/retrieval/retriever.py:scope). The in-memory and sqlite stores evaluate it as numpy masks
over per-field columns (eddi_rag/stores/embedded/masks.py); the peer is the reference evaluator called on
every row (what the in-memory store did before), measured in the same run.

    .venv/bin/python benchmarks/bench_filters.py [--n 100000] [--dim 384] [--repeats 20]

Prints a table; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np

from eddi_rag.retrieval.retriever import scope
from eddi_rag.state.sqlite import Database
from eddi_rag.stores import filters
from eddi_rag.stores.base import Chunk, StoreContext
from eddi_rag.stores.embedded.memory import InMemoryStore
from eddi_rag.stores.embedded.sqlite import SqliteStore
from eddi_rag.stores.toolkit import normalise, top_k


def median_ms(fn, repeats: int) -> float:
    fn()  # warm: builds caches
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((args.n, args.dim)).astype(np.float32)
    chunks = [Chunk(f"c{i:07d}", f"text {i}", {"source": f"doc{i % 100}.md", "ingestedAt": 1.7e9 + i}
                    | ({"user_id": f"u{i % 7}", "private": True} if i % 10 == 0 else {}), matrix[i])
              for i in range(args.n)]
    q = rng.standard_normal(args.dim)
    now = time.time()
    wheres = {"none": None, "scope": scope(None, "u1", now), "scope + source": scope({"source": "doc3.md"}, "u1", now)}
    tmp = tempfile.mkdtemp()
    print(f"{args.n:,} chunks x {args.dim}-d, top-5, median of {args.repeats}")
    print("| store | filter | median ms | x unfiltered |\n|---|---|---|---|")
    for cls in (InMemoryStore, SqliteStore):
        store = cls("kb", {}, StoreContext(Database(f"{tmp}/{cls.__name__}.db"), None))
        for start in range(0, args.n, 10_000):
            store.upsert(chunks[start : start + 10_000])
        base = None
        for label, where in wheres.items():
            ms = median_ms(lambda w=where: store.search(q, 5, where=w), args.repeats)
            base = base or ms
            print(f"| {cls.__name__} | {label} | {ms:.2f} | {ms / base:.1f} |")
    unit = normalise(matrix)
    metas, ids, node = [c.metadata for c in chunks], [c.id for c in chunks], filters.parse(wheres["scope"])

    def per_row() -> None:
        rows = np.array([i for i, m in enumerate(metas) if filters.matches(node, m)])
        top_k(unit[rows] @ normalise(q)[0], [ids[r] for r in rows], 5)

    print(f"| peer: reference evaluator per row | scope | {median_ms(per_row, max(3, args.repeats // 4)):.2f} | |")


if __name__ == "__main__":
    main()
