"""The default query path against the vector search it wraps (issue 34, point 2; first part: ``Search.run``).

    .venv/bin/python benchmarks/bench_query.py [--sizes 10000 100000] [--queries 60] [--data ../shared/data/nfcorpus]

A knowledge base with every default (``sqlite`` store, markdown chunks, hybrid weighted search, neighbour context)
filled through the ingestion pipeline with NFCorpus's abstracts as Markdown (``# title``, then the abstract),
the first copy through the ingestion pipeline, further ones written to the store as it wrote the first (under new
document ids) until it holds the size asked. So that only the product's own work is timed, a
stand-in embedding fills it and embeds the questions (``Hashed``: 384-d signed feature hashing of the words,
normalised; it is fast and deterministic, not a model); the real local model's query embedding is timed apart.

For 60 NFCorpus test queries it prints p50 / p95 of ``Search.run`` (hits and the passages that reach the model)
with the defaults, vector only, keyword only and vector with neighbours; beside them, in the same run, the peer
floor: FAISS ``IndexHNSWFlat`` (M 16, efSearch 64) plus bm25s over the same chunks. The goal: defaults within
1.5 × (query embedding + vector search). It then serves the app under uvicorn on 127.0.0.1 with a KB of
``--rest-docs`` documents embedded by the local model and measures ``POST /query`` with 1, 4 and 8 clients asking
questions none asked before (the server embeds each with the local model), against the machine's limit: cores ÷ the
time one query takes in process, asked alone (embedding, ``Search.run`` and the response's JSON). The goal: 8 clients at 70%
of it or more. Traffic goes to 127.0.0.1 only, ``--rest-seconds`` per row. Asserts nothing about time.

    .venv/bin/python benchmarks/bench_query.py [--rest-seconds 10] [--rest-docs 1000] [--clients 1 4 8]

Point 6, the fleet path: at each of ``--fleet-sizes`` (default 10k and 100k; none to skip) the same paths with the
state and the knowledge base on one throwaway PostgreSQL 16 + pgvector server (tests.support.services, pgserver from
PyPI, a unix socket): pgvector's HNSW for the vectors, the BM25 index kept beside PostgreSQL for the keywords
(stores.pgvector_keywords). ``--fleet-copies sql`` writes the copies after the first in PostgreSQL itself (``INSERT
... SELECT``, each copy's vectors random unit vectors, the HNSW index built once after): a million chunks in about
half an hour on 2 cores, where writing them through the store takes hours.

    .venv/bin/python benchmarks/bench_query.py [--fleet-sizes 10000 100000] [--fleet-copies store|sql]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
from langchain_core.embeddings import Embeddings

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench_keyword import timed as keyword_timed  # noqa: E402
from bench_load import serving  # noqa: E402

from eddi_rag.ingest.pipeline import Document  # noqa: E402
from eddi_rag.retrieval.retriever import scope  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402
from eddi_rag.stores.base import Chunk  # noqa: E402
from eddi_rag.verbs.search import SearchRequest  # noqa: E402

DIM = 384
VECTOR_ALONE = "the store's vector search alone (top 15, with the query's filter)"
WORD = re.compile(r"\w+")


class Hashed(Embeddings):
    """A stand-in embedding: each word adds ±1 to one of 384 dimensions (by its hash); normalised."""

    def _one(self, text: str) -> list[float]:
        v = np.zeros(DIM, dtype=np.float32)
        for w in WORD.findall(text.lower()):
            h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "little")
            v[h % DIM] += 1.0 if (h >> 32) & 1 else -1.0
        n = float(np.linalg.norm(v))
        return (v / n if n else v + 1 / math.sqrt(DIM)).tolist()

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


def timed(run: Callable[[str], object], asked: list[str]) -> tuple[float, float]:
    """p50 and p95 in ms of ``run`` over ``asked`` (bench_keyword's timing)."""
    p50, p95, _ = keyword_timed(run, asked)
    return p50, p95


def rest(docs: list[dict], questions: list[str], seconds: float, counts: list[int]) -> None:
    """REST ``/query`` throughput with each number of clients (unique questions, the real local model embedding
    each) on a KB of ``docs`` embedded by that model (so that questions find what they would: with the stand-in's
    vectors, a real question's vector matched nothing and the rows measured empty answers), against the machine's
    limit: cores ÷ the time one query takes in process, asked alone (embed, ``Search.run`` and the response's JSON)."""
    import os

    with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as rt:
        kb = rt.resources.create("rags", {"name": "rest", "embeddingProvider": "local", "storeType": "sqlite"}).id
        t0 = time.perf_counter()
        rt.ingesting.batch([Document(d["_id"], f"# {d['title']}\n\n{d['text']}") for d in docs], kb)
        print(f"\nREST: {len(docs)} NFCorpus documents embedded by the local model in {time.perf_counter() - t0:.0f} s")
        model = rt.embeddings.for_config(rt.rag_config(kb))
        for q in questions[-20:]:  # warm: the first question loads the store's rows and builds its keyword index
            json.dumps(rt.search.run(SearchRequest(kb, q, vector=model.embed_query(q))).to_json())
        sample, searched, answered, hits = questions[:40], 0.0, 0.0, 0
        for q in sample:  # (wall time, one query at a time: the process's CPU time also counts onnxruntime's threads
            c0 = time.perf_counter()  # spinning after each run, which would make the limit lower than it is)
            result = rt.search.run(SearchRequest(kb, q, vector=model.embed_query(q)))
            c1 = time.perf_counter()
            json.dumps(result.to_json())
            searched, answered, hits = searched + c1 - c0, answered + time.perf_counter() - c1, hits + len(result.hits)
        cpu = (searched + answered) / len(sample)
        cores = len(os.sched_getaffinity(0))
        limit = cores / cpu
        _serve_queries(rt, kb, questions, seconds, counts, limit,
                       f"one query in process, one at a time, {cpu * 1000:.1f} ms (embed + Search.run {searched / len(sample) * 1000:.1f}, "
                       f"the response's JSON {answered / len(sample) * 1000:.1f}; "
                       f"{hits / len(sample):.1f} hits a question)")


def _serve_queries(rt: Runtime, kb: str, questions: list[str], seconds: float, counts: list[int], limit: float,
                   cost: str) -> None:
    import os
    import threading

    cores = len(os.sched_getaffinity(0))
    with serving(rt) as base:
        print(f"\nREST `/query`, {rt.stores.get(kb, rt.rag_config(kb)).count():,} chunks, {seconds:.0f} s per row, unique questions; "
              f"{cost}, so the limit on {cores} cores is {limit:.0f} requests/s (clients and server share them)\n")
        print("| clients | requests/s | of the limit | p50 ms | p95 ms | errors |")
        print("|---:|---:|---:|---:|---:|---:|")
        start = 40
        for n in counts:
            latencies: list[float] = []
            errors = [0]
            lock = threading.Lock()
            stop = time.monotonic() + seconds
            mine = [questions[start + i::n] for i in range(n)]  # (each client its own questions, none asked twice)
            start += 1000

            def run(asked: list[str]) -> None:
                with httpx.Client(base_url=base, timeout=60) as http:
                    for q in asked:
                        if time.monotonic() >= stop:
                            return
                        t0 = time.perf_counter()
                        try:
                            ok = http.post(f"/ragstore/rags/{kb}/query", json={"query": q}).status_code == 200
                        except httpx.HTTPError:
                            ok = False
                        with lock:
                            latencies.append((time.perf_counter() - t0) * 1000)
                            errors[0] += not ok

            threads = [threading.Thread(target=run, args=(mine[i],)) for i in range(n)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            took = time.perf_counter() - t0
            latencies.sort()
            rate = len(latencies) / took
            print(f"| {n} | {rate:.1f} | {rate / limit:.0%} | {statistics.median(latencies):.0f} | "
                  f"{latencies[int(0.95 * (len(latencies) - 1))]:.0f} | {errors[0]} of {len(latencies)} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/nfcorpus"))
    parser.add_argument("--sizes", type=int, nargs="*", default=[10000, 100000], help="sizes on the sqlite store (none: skip)")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rest-seconds", type=float, default=10, help="per number of clients (0: no REST)")
    parser.add_argument("--rest-docs", type=int, default=1000, help="documents of the KB REST queries (embedded by the local model)")
    parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
    parser.add_argument("--fleet-sizes", type=int, nargs="*", default=[10000, 100000],
                        help="sizes measured on PostgreSQL + pgvector (none: skip)")
    parser.add_argument("--fleet-copies", choices=["store", "sql"], default="store",
                        help="the copies after the first: written through the store (its vectors), or by PostgreSQL (random vectors)")
    args = parser.parse_args()
    data = Path(args.data)
    docs = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines()]
    everything = [json.loads(line)["text"] for line in (data / "queries.jsonl").read_text().splitlines()]
    everything = list(dict.fromkeys(q for q in everything if len(q.split()) <= 30))
    asked = everything[: args.queries]
    stand_in = Hashed()

    from eddi_rag.embeddings.local import LocalOnnxEmbeddings

    model = LocalOnnxEmbeddings()
    model.embed_query("warm up")
    embed_p50, embed_p95 = timed(model.embed_query, asked)
    print(f"NFCorpus queries: {len(asked)}; the local model's query embedding: p50 {embed_p50:.2f} ms, p95 {embed_p95:.2f} ms\n")
    print("| chunks | path | p50 ms | p95 ms | p50 ÷ (query embedding + the store's vector search) |")
    print("|---:|---|---:|---:|---:|")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as rt:
            kb, store, one, copy, built = fill(rt, {"storeType": "sqlite"}, docs, size, stand_in)
            chunks = store.count()
            vectors = {q: stand_in.embed_query(q) for q in asked}
            figures = paths(rt, kb, store, vectors, asked)
            import faiss

            from eddi_rag.stores.embedded.bm25 import Bm25Index

            # the peers over the same chunks: every copy's vectors are the first copy's (the stand-in is deterministic);
            # numpy and plain strings, not Chunk objects (1M chunks with their vectors as Python lists took 22 GB)
            texts = [c.text for c in one]
            matrix = np.tile(np.array(stand_in.embed_documents(texts), dtype=np.float32), (copy, 1))
            hnsw = faiss.IndexHNSWFlat(DIM, 16, faiss.METRIC_INNER_PRODUCT)
            hnsw.hnsw.efConstruction, hnsw.hnsw.efSearch = 100, 64
            hnsw.add(matrix)
            bm25 = Bm25Index([str(i) for i in range(len(matrix))], texts * copy)

            def floor(q: str) -> list[int]:
                _, found = hnsw.search(np.array([vectors[q]], dtype=np.float32), 15)
                keyword = bm25.search(q, 15)
                return [*found[0].tolist(), *(hash(i) for i, _ in keyword)]

            figures["peer floor: FAISS HNSW + bm25s, top 15 each"] = timed(floor, asked)
            figures["peer: FAISS HNSW alone"] = timed(lambda q: hnsw.search(np.array([vectors[q]], dtype=np.float32), 15), asked)
            table(chunks, f"{copy} cop{'y' if copy == 1 else 'ies'} of the corpus; the first through the pipeline in {built:.0f} s",
                  figures, embed_p50)
    if args.rest_seconds > 0:
        rest(docs[: args.rest_docs], everything, args.rest_seconds, args.clients)
    if not args.fleet_sizes:
        return
    sys.path.insert(0, str(ROOT))
    from tests.support.services import allow_outbound, postgres

    print("\nThe fleet path: the state and the knowledge base on one PostgreSQL 16 + pgvector server (a unix socket), "
          "hybrid with PostgreSQL's own full-text search\n")
    print("| chunks | path | p50 ms | p95 ms | p50 ÷ (query embedding + the store's vector search) |")
    print("|---:|---|---:|---:|---:|")
    for size in args.fleet_sizes:
        with postgres() as url, tempfile.TemporaryDirectory() as tmp:
            allow_outbound(url.rsplit("host=", 1)[-1].split("&")[0])
            with Runtime(tmp, state_url=url, fleet=True) as rt:
                kb, store, _, copy, built = fill(rt, {"storeType": "pgvector", "storeParameters": {"url": url}}, docs,
                                                 size, stand_in, in_sql=args.fleet_copies == "sql")
                vectors = {q: stand_in.embed_query(q) for q in asked}
                table(store.count(), f"pgvector; {copy} cop{'y' if copy == 1 else 'ies'}, the first through the pipeline in "
                      f"{built:.0f} s", paths(rt, kb, store, vectors, asked), embed_p50)


def fill(rt: Runtime, where: dict, docs: list[dict], size: int, stand_in: Hashed, in_sql: bool = False
         ) -> tuple[str, object, list, int, float]:
    """A KB with every default on ``where``'s store, filled with copies of the corpus up to ``size`` chunks: the first
    through the ingestion pipeline, the others written to the store as it wrote the first (under new document ids), or
    with ``in_sql`` (a ``pgvector`` store) by PostgreSQL itself."""
    rt.embeddings.for_config = lambda config: stand_in  # (only the product's own work is timed)
    kb = rt.resources.create("rags", {"name": "bench", "embeddingProvider": "local", **where}).id
    t0 = time.perf_counter()
    rt.ingesting.batch([Document(d["_id"], f"# {d['title']}\n\n{d['text']}") for d in docs], kb)
    built = time.perf_counter() - t0
    store = rt.stores.get(kb, rt.rag_config(kb))
    one = store.get()
    copies = math.ceil(size / len(one))
    if in_sql:
        copies_in_sql(where["storeParameters"]["url"], kb, copies)
        return kb, store, one, copies, built
    copy = 1
    while copy * len(one) < size:
        store.upsert([Chunk(f"{c.id}~{copy}", c.text, {**c.metadata, "document_id": f"{c.metadata['document_id']}~{copy}"},
                            stand_in.embed_query(c.text)) for c in one])
        copy += 1
    return kb, store, one, copy, built


def copies_in_sql(url: str, kb: str, copies: int) -> None:
    """Copies 1 .. ``copies`` - 1 of a ``pgvector`` KB's rows (its first copy) written by PostgreSQL: new ids and
    document ids, random vectors, the HNSW index dropped before and built after (in one process's memory)."""
    import psycopg

    from eddi_rag.stores import pgvector_keywords
    from eddi_rag.stores.pgvector import table_name

    table = table_name(kb)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX IF EXISTS {table}_hnsw")
        conn.execute(
            f"INSERT INTO {table} (id, text, metadata, embedding) SELECT o.id || '~' || c, o.text, jsonb_set(o.metadata, "
            "'{document_id}', to_jsonb((o.metadata ->> 'document_id') || '~' || c)), (SELECT array_agg(random()::real - 0.5) "
            "FROM generate_series(1, vector_dims(o.embedding) + 0 * c))::vector "  # (one per row: the row is in it)
            f"FROM {table} o, generate_series(1, %s) c", (copies - 1,))
        conn.execute("SET maintenance_work_mem = '6GB'")
        conn.execute(f"CREATE INDEX {table}_hnsw ON {table} USING hnsw (embedding vector_cosine_ops)")
        with conn.transaction(), conn.cursor() as cur:
            pgvector_keywords.log_drop(cur, table)  # (every process's keyword index built again, as after a drop)


def paths(rt: Runtime, kb: str, store: object, vectors: dict[str, list[float]], asked: list[str]) -> dict[str, tuple[float, float]]:
    """p50/p95 of the store's vector search and of ``Search.run`` by each path."""

    def search(mode: str | None = None, expansion: str | None = None) -> Callable[[str], object]:
        return lambda q: rt.search.run(SearchRequest(kb, q, vector=vectors[q], mode=mode, expansion=expansion))

    node = scope(None, None, time.time())
    return {
        VECTOR_ALONE: timed(lambda q: store.search(vectors[q], 15, where=node), asked),  # type: ignore[attr-defined]
        "defaults (hybrid weighted, neighbours)": timed(search(), asked),
        "vector only, no context": timed(search("vector", "none"), asked),
        "keyword only, no context": timed(search("keyword", "none"), asked),
        "hybrid, no context": timed(search(None, "none"), asked),
        "vector, neighbours": timed(search("vector", None), asked),
    }


def table(chunks: int, what: str, figures: dict[str, tuple[float, float]], embed_p50: float) -> None:
    vector_p50 = figures[VECTOR_ALONE][0]
    print(f"| {chunks:,} | ({what}) | | | |")
    for name, (p50, p95) in figures.items():
        print(f"| {chunks:,} | {name} | {p50:.2f} | {p95:.2f} | {p50 / (embed_p50 + vector_p50):.2f} |", flush=True)


if __name__ == "__main__":
    main()
