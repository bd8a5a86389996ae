"""Speed at any size (issue 11): our embedded stores, exact and HNSW, against the peers, in ONE run.

For each size (default 100k and 1M × 384, clustered like text embeddings):

* search: build time (to searchable), top-5 p50/p95, recall@10 against exact search, memory
  (this process's resident growth while the system holds the data; "server" for a separate
  process) for: eddi-rag in-memory and sqlite (exact and HNSW), an int8 scan with float
  rescoring (a trial), FAISS HNSW, usearch, Chroma embedded (in its own venv), pgvector HNSW,
  sqlite-vec (bare engine and through our store) and LangChain's InMemoryVectorStore;
* the exact scan against the memory-bandwidth floor (one pass reading the matrix);
* the write path: replace one 10-chunk document (what every ingestion does), the first search
  after it and the steady state, for our in-memory and sqlite stores.

    .venv/bin/python benchmarks/bench_scale.py [--sizes 100000 1000000] [--queries 100]
        [--skip chroma pgvector ...] [--write-sizes 10000 100000 1000000] [--ef 128] [--ef-sweep 64 128 256]

Prints Markdown tables (ratios to FAISS HNSW); asserts nothing about time. HNSW everywhere uses
M=16 (usearch: connectivity 16), construction breadth 100 (usearch 128) and search breadth 64
(pgvector store: 100; ours: 64 up to 100k rows, 192 at 1M) unless ``--ef`` sets one for all.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.support.services starts pgvector and finds chroma's venv
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_stores import synthetic  # noqa: E402

from eddi_rag.backends import registry  # noqa: E402
from eddi_rag.state.sqlite import Database  # noqa: E402
from eddi_rag.stores.base import Chunk, StoreContext  # noqa: E402

DIM = 384
SYSTEMS = ["in-memory exact", "in-memory hnsw", "sqlite exact", "sqlite hnsw", "int8 scan + rescoring", "faiss hnsw",
           "usearch", "chroma", "pgvector hnsw", "sqlite-vec bare", "sqlite-vec", "langchain in-memory"]
HEAVY = {"chroma", "pgvector hnsw", "langchain in-memory"}
EF: int | None = None  # --ef: every HNSW's search breadth (default: each system's own, 64 here)
SWEEP: list[int] = []  # --ef-sweep: FAISS HNSW's recall and p50 at each of these search breadths


def rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def timed(search: Callable[[np.ndarray, int], list[int]], queries: np.ndarray, truth: list[set[int]], limit: int | None = None):
    """(p50 ms, p95 ms, recall@10) of ``search(q, k) -> row numbers``."""
    queries, truth = (queries, truth) if limit is None else (queries[:limit], truth[:limit])
    search(queries[0], 5)
    lat, found = [], 0
    for q, t in zip(queries, truth):
        t0 = time.perf_counter()
        search(q, 5)
        lat.append((time.perf_counter() - t0) * 1000)
        found += len(set(search(q, 10)) & t)
    lat.sort()
    return statistics.median(lat), lat[max(0, int(len(lat) * 0.95) - 1)], found / (10 * len(queries))


def ours(name: str, index: str, data, ids, chunks, queries, truth, tmp: Path, write_path: dict):
    ctx = StoreContext(Database(tmp / f"{uuid.uuid4().hex[:6]}.db"), tmp)
    before, t0 = rss(), time.perf_counter()
    params = {"index": index, **({"efSearch": EF} if EF and index == "hnsw" else {})}
    store = registry.load(registry.STORES, name)("bench", params, ctx)
    for start in range(0, len(chunks), 10_000):
        store.upsert(chunks[start : start + 10_000])
    store.search(queries[0], 5)  # builds the graph (hnsw)
    build = time.perf_counter() - t0
    row = {ident: i for i, ident in enumerate(ids)}
    figures = timed(lambda q, k: [row[h.id] for h in store.search(q, k)], queries, truth)
    memory = rss() - before
    write_path[(name, index)] = replace_figures(store, data, len(chunks), queries)
    store.drop()
    ctx.close()
    return build, *figures, memory


def replace_figures(store, data: np.ndarray, n: int, queries: np.ndarray):
    """Replacing one 10-chunk document, then searching: see write_figures."""
    def replace(j: int) -> None:
        doc = f"d{(j * 7919) % (n // 10):07d}"
        store.replace({"document_id": doc}, [Chunk(f"{doc}-{i}", "replaced", {"document_id": doc}, data[(j * 13 + i) % n])
                                             for i in range(10)])

    return write_figures(replace, lambda q: store.search(q, 5), queries)


def write_figures(write: Callable[[int], None], search: Callable[[np.ndarray], object], queries: np.ndarray, times: int = 20):
    """Median ms of: the j-th write, the first search after it, a steady search."""
    figures: tuple[list[float], ...] = ([], [], [])
    for j in range(times):
        q = queries[j % len(queries)]
        for spent, call in zip(figures, (lambda: write(j), lambda: search(q), lambda: search(q))):
            t0 = time.perf_counter()
            call()
            spent.append(time.perf_counter() - t0)
    return tuple(statistics.median(x) * 1000 for x in figures)


def faiss_hnsw(data, queries, truth, write_path: dict):
    import faiss

    before, t0 = rss(), time.perf_counter()
    index = faiss.IndexHNSWFlat(DIM, 16, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = 100
    index.add(data)
    index.hnsw.efSearch = EF or 64
    build = time.perf_counter() - t0
    search = lambda q, k: index.search(q[None], k)[1][0].tolist()  # noqa: E731
    figures = build, *timed(search, queries, truth), rss() - before
    for ef in SWEEP:  # the recall / latency curve of this graph
        index.hnsw.efSearch = ef
        p50, p95, recall = timed(search, queries, truth)
        print(f"  {len(data):,}: faiss hnsw at efSearch {ef}: p50 {p50:.3f} ms, p95 {p95:.3f} ms, recall@10 {recall:.3f}", flush=True)
    index.hnsw.efSearch = EF or 64
    add = lambda j: index.add(data[[(j * 13 + i) % len(data) for i in range(10)]])  # noqa: E731
    write_path[("faiss hnsw", "(peer: add 10 vectors)")] = write_figures(add, lambda q: search(q, 5), queries)
    return figures


def int8_scan(data, queries, truth):
    """faiss's 8-bit scalar quantiser scanned exhaustively, the best 50 rescored in float32."""
    import faiss

    before, t0 = rss(), time.perf_counter()
    index = faiss.IndexScalarQuantizer(DIM, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT)
    index.train(data[:100_000])
    index.add(data)
    build = time.perf_counter() - t0

    def search(q, k):
        cand = index.search(q[None], 50)[1][0]
        sims = data[cand] @ q
        return cand[np.argsort(-sims)[:k]].tolist()

    return build, *timed(search, queries, truth), rss() - before


def usearch(data, queries, truth):
    from usearch.index import Index

    before, t0 = rss(), time.perf_counter()
    index = Index(ndim=DIM, metric="ip", connectivity=16, expansion_add=128, expansion_search=EF or 64)
    index.add(np.arange(len(data)), data, threads=os.cpu_count() or 1)
    build = time.perf_counter() - t0
    return build, *timed(lambda q, k: index.search(q, k).keys.tolist(), queries, truth), rss() - before


def sqlite_vec_bare(data, queries, truth, tmp: Path):
    import apsw
    import sqlite_vec

    conn = apsw.Connection(str(tmp / "vec.db"))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    t0 = time.perf_counter()
    conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}] distance_metric=cosine)")
    with conn:
        conn.executemany("INSERT INTO v (rowid, embedding) VALUES (?, ?)", ((i, data[i].tobytes()) for i in range(len(data))))
    build = time.perf_counter() - t0

    def search(q, k):
        return [r - 0 for (r,) in conn.execute("SELECT rowid FROM v WHERE embedding MATCH ? AND k = ?", (q.tobytes(), k))]

    figures = timed(search, queries, truth)
    conn.close()
    return build, *figures, None


def langchain(data, queries, truth):
    from langchain_core.embeddings import Embeddings
    from langchain_core.vectorstores import InMemoryVectorStore

    class Fixed(Embeddings):  # the vectors are given; the store only needs the interface
        def embed_documents(self, texts):
            raise NotImplementedError

        def embed_query(self, text):
            raise NotImplementedError

    before, t0 = rss(), time.perf_counter()
    store = InMemoryVectorStore(Fixed())
    store.store = {str(i): {"id": str(i), "vector": data[i].tolist(), "text": "", "metadata": {}} for i in range(len(data))}
    build = time.perf_counter() - t0
    search = lambda q, k: [int(d.id) for d in store.similarity_search_by_vector(q.tolist(), k)]  # noqa: E731
    return build, *timed(search, queries, truth, limit=5), rss() - before


def chroma_embedded(data, queries, truth, tmp: Path):
    """Chroma in-process (PersistentClient) in the venv the tests' chroma server runs from."""
    venv = subprocess.run([str(ROOT / "scripts" / "chroma-server-venv")], check=True, capture_output=True, text=True).stdout.strip()
    np.save(tmp / "data.npy", data)
    np.save(tmp / "queries.npy", queries)
    script = r"""
import json, sys, time, statistics, numpy as np, chromadb
tmp = sys.argv[1]; data = np.load(tmp + "/data.npy"); queries = np.load(tmp + "/queries.npy")
truth = [set(t) for t in json.load(open(tmp + "/truth.json"))]
client = chromadb.PersistentClient(path=tmp + "/chroma")
col = client.create_collection("bench", metadata={"hnsw:space": "cosine", "hnsw:M": 16, "hnsw:construction_ef": 100, "hnsw:search_ef": int(sys.argv[2])})
t0 = time.perf_counter()
step = client.get_max_batch_size()
for s in range(0, len(data), step):
    col.add(ids=[str(i) for i in range(s, min(len(data), s + step))], embeddings=data[s:s + step])
build = time.perf_counter() - t0
search = lambda q, k: [int(i) for i in col.query(query_embeddings=[q], n_results=k, include=[])["ids"][0]]
search(queries[0], 5)
lat, found = [], 0
for q, t in zip(queries, truth):
    t0 = time.perf_counter(); search(q, 5); lat.append((time.perf_counter() - t0) * 1000)
    found += len(set(search(q, 10)) & t)
lat.sort()
print(json.dumps([build, statistics.median(lat), lat[max(0, int(len(lat) * 0.95) - 1)], found / (10 * len(queries))]))
"""
    (tmp / "truth.json").write_text(json.dumps([sorted(t) for t in truth]))
    out = subprocess.run([f"{venv}/bin/python", "-c", script, str(tmp), str(EF or 64)], check=True, capture_output=True, text=True).stdout
    return *json.loads(out.strip().splitlines()[-1]), "server"


def pgvector(data, queries, truth, chunks, ids, services):
    from tests.support.services import postgres

    params = {"url": services.enter_context(postgres()), "index": "none", **({"efSearch": EF} if EF else {})}
    store = registry.load(registry.STORES, "pgvector")(f"bench-{uuid.uuid4().hex[:6]}", params,
                                                       StoreContext(Database()))
    t0 = time.perf_counter()
    for start in range(0, len(chunks), 5000):
        store.upsert(chunks[start : start + 5000])
    store.create_index()
    build = time.perf_counter() - t0
    row = {ident: i for i, ident in enumerate(ids)}
    figures = timed(lambda q, k: [row[h.id] for h in store.search(q, k)], queries, truth)
    store.drop()
    return build, *figures, "server"


def sqlite_vec_store(chunks, ids, queries, truth, tmp: Path):
    store = registry.load(registry.STORES, "sqlite-vec")("bench", {"path": str(tmp / "ours-vec.db")}, StoreContext(Database()))
    t0 = time.perf_counter()
    for start in range(0, len(chunks), 10_000):
        store.upsert(chunks[start : start + 10_000])
    build = time.perf_counter() - t0
    row = {ident: i for i, ident in enumerate(ids)}
    figures = timed(lambda q, k: [row[h.id] for h in store.search(q, k)], queries, truth)
    store.drop()
    return build, *figures, None


def floor_ms(data: np.ndarray) -> float:
    """One pass reading the whole matrix (a column sum): what any exact scan must at least cost."""
    lat = []
    for _ in range(10):
        t0 = time.perf_counter()
        data.sum(axis=0)
        lat.append((time.perf_counter() - t0) * 1000)
    return statistics.median(lat)


def mb(x) -> str:
    return x if isinstance(x, str) else "n/a" if x is None else f"{x / 2**20:,.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--write-sizes", type=int, nargs="*", default=[10_000])
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--skip", nargs="*", default=[], help=f"systems to leave out: {', '.join(SYSTEMS)}")
    parser.add_argument("--heavy-max", type=int, default=100_000,
                        help="largest size for the slow-to-build peers (Chroma, pgvector) and LangChain (12 GB of lists at 1M)")
    parser.add_argument("--ef", type=int, help="search breadth for every HNSW (ours, FAISS, usearch, Chroma, pgvector)")
    parser.add_argument("--ef-sweep", type=int, nargs="*", default=[], help="also print FAISS HNSW's recall and p50 at these")
    args = parser.parse_args()
    global EF, SWEEP
    EF, SWEEP = args.ef, args.ef_sweep
    write_path: dict[int, dict] = {}
    for n in sorted(set(args.sizes) | set(args.write_sizes)):
        rng = np.random.default_rng(7)
        data = synthetic(n, DIM, rng)
        queries = synthetic(args.queries, DIM, rng)
        truth = [set(np.argpartition(-(data @ q), 10)[:10].tolist()) for q in queries]
        ids = [f"d{i // 10:07d}-{i % 10}" for i in range(n)]
        chunks = [Chunk(ids[i], f"text {i}", {"document_id": ids[i][:8], "source": f"s{i % 100}"}, data[i]) for i in range(n)]
        write_path[n] = {}
        rows = []
        wanted = [s for s in SYSTEMS if s not in args.skip and (n <= args.heavy_max or s not in HEAVY)]
        wanted = wanted if n in args.sizes else ["in-memory exact", "sqlite exact"]
        with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as services:
            tmp = Path(tmp)
            for system in wanted:
                gc.collect()
                if system.startswith(("in-memory ", "sqlite ")):
                    name, index = system.split()
                    result = ours(name, index, data, ids, chunks, queries, truth, tmp, write_path[n])
                elif system == "faiss hnsw":
                    result = faiss_hnsw(data, queries, truth, write_path[n])
                elif system == "int8 scan + rescoring":
                    result = int8_scan(data, queries, truth)
                elif system == "usearch":
                    result = usearch(data, queries, truth)
                elif system == "chroma":
                    result = chroma_embedded(data, queries, truth, tmp)
                elif system == "pgvector hnsw":
                    result = pgvector(data, queries, truth, chunks, ids, services)
                elif system == "sqlite-vec bare":
                    result = sqlite_vec_bare(data, queries, truth, tmp)
                elif system == "sqlite-vec":
                    result = sqlite_vec_store(chunks, ids, queries, truth, tmp)
                else:
                    result = langchain(data, queries, truth)
                rows.append((system, *result))
                print(f"  {n:,}: measured {system}: {result}", flush=True)
        if n not in args.sizes:
            continue
        floor = floor_ms(data)
        peer = next((r[2] for r in rows if r[0] == "faiss hnsw"), None)
        ef = f"efSearch {EF}" if EF else "HNSW at each system's default search breadth (ours: size-aware)"
        print(f"\n### {n:,} × {DIM} (clustered), top-5, {args.queries} queries, {ef}; bandwidth floor {floor:.2f} ms\n")
        print("| system | build s | p50 ms | p95 ms | × FAISS HNSW p50 | × floor | recall@10 | memory MB |\n|---|---:|---:|---:|---:|---:|---:|---:|")
        for system, build, p50, p95, recall, memory in rows:
            ratio = f"{p50 / peer:.2f}" if peer else "n/a"
            print(f"| {system} | {build:.1f} | {p50:.2f} | {p95:.2f} | {ratio} | {p50 / floor:.2f} | {recall:.3f} | {mb(memory)} |")
        del data, chunks
    print("\n### Write path: replace one 10-chunk document (median of 20, ms)\n")
    print("| size | store | replace | first search after | steady search |\n|---:|---|---:|---:|---:|")
    for n, figures in write_path.items():
        for (name, index), (rep, first, steady) in figures.items():
            print(f"| {n:,} | {name} {index} | {rep:.2f} | {first:.2f} | {steady:.2f} |")


if __name__ == "__main__":
    main()
