"""Speed figures for the spine, each next to a peer measured in the same run.

1. Ingestion: chunks/s through Runtime.ingest (split + embed + cache + sqlite write, one document
   at a time) and through RagPipeline.ingest (all documents, embedding buffered across them) vs
   the bare local model's texts/s on the same chunk texts.
2. Top-5 search latency over 384-d vectors at 10k and 100k chunks: our in-memory and sqlite
   stores vs LangChain's InMemoryVectorStore (same vectors, same queries).

    .venv/bin/python benchmarks/bench_spine.py [--corpus ../shared/data/nfcorpus/corpus.jsonl] [--docs 200]

Prints figures; asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore

from eddi_rag.embeddings.local import LocalOnnxEmbeddings
from eddi_rag.ingest.chunking import split_text
from eddi_rag.ingest.pipeline import Document
from eddi_rag.runtime import Runtime
from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import Chunk, StoreContext
from eddi_rag.stores.embedded.memory import InMemoryStore
from eddi_rag.stores.embedded.sqlite import SqliteStore

DEFAULT_CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "nfcorpus" / "corpus.jsonl"


def load_texts(corpus: Path, n: int) -> list[str]:
    if corpus.is_file():
        with corpus.open(encoding="utf-8") as f:
            docs = [json.loads(line) for _, line in zip(range(n), f)]
        return [f"{d.get('title', '')}\n\n{d['text']}" for d in docs]
    print(f"(no corpus at {corpus}: using the example documents, repeated)")
    examples = [p.read_text(encoding="utf-8") for p in sorted(Path("examples/documents").rglob("*.md"))]
    return [examples[i % len(examples)] + f"\n\nCopy {i}." for i in range(n)]


def bench_ingestion(texts: list[str]) -> None:
    print(f"\n## Ingestion ({len(texts)} documents)")
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime(tmp)
        kb = rt.resources.create("rags", {"name": "bench", "embeddingProvider": "local", "storeType": "sqlite"}).id
        config = rt.rag_config(kb)
        chunks = [c for t in texts for c in split_text(t, config)]
        model = LocalOnnxEmbeddings()
        model.embed_documents(chunks[:8])  # warm up
        t0 = time.perf_counter()
        model.embed_documents(chunks)
        bare = len(chunks) / (time.perf_counter() - t0)
        rt.embeddings.for_config(config).embed_query("warm up")
        t0 = time.perf_counter()
        n = sum(rt.ingest(kb, f"doc{i}", t) for i, t in enumerate(texts))
        ours = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        sum(rt.ingest(kb, f"doc{i}", t) for i, t in enumerate(texts))
        cached = n / (time.perf_counter() - t0)
        rt.close()
    with tempfile.TemporaryDirectory() as tmp:  # a new runtime: a cold embedding cache
        rt = Runtime(tmp)
        fresh = rt.resources.create("rags", {"name": "bench-batch", "embeddingProvider": "local", "storeType": "sqlite"}).id
        rt.embeddings.for_config(rt.rag_config(fresh)).embed_query("warm up")
        t0 = time.perf_counter()
        result = rt.ingesting.batch([Document(f"doc{i}", t) for i, t in enumerate(texts)], fresh)
        batched = result.chunk_count / (time.perf_counter() - t0)
        rt.close()
    print("| what | chunks/s |\n|---|---|")
    print(f"| bare local model, embed_documents on the {len(chunks)} chunk texts | {bare:.1f} |")
    print(f"| Runtime.ingest (split, embed, cache, sqlite write), cold cache | {ours:.1f} ({ours / bare:.2f}× bare) |")
    print(f"| Runtime.ingest again, unchanged text (embedding cache hits) | {cached:.1f} ({cached / bare:.1f}× bare) |")
    print(f"| RagPipeline.ingest of all documents at once (embedding buffer: batches across documents, "
          f"overlapped with splitting and writing), new KB | {batched:.1f} ({batched / bare:.2f}× bare) |")


class _Lookup(Embeddings):
    """Hands LangChain's store the precomputed vectors, so only search is timed."""

    def __init__(self, vectors: dict[str, list[float]]):
        self.vectors = vectors

    def embed_documents(self, texts):
        return [self.vectors[t] for t in texts]

    def embed_query(self, text):
        return self.vectors[text]


def _latency(search, queries: np.ndarray) -> tuple[float, float]:
    times = []
    for q in queries:
        t0 = time.perf_counter()
        search(q)
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.95) - 1]


def bench_search(n: int, dim: int = 384, queries: int = 100) -> None:
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((n, dim)).astype(np.float32)
    qs = rng.standard_normal((queries, dim)).astype(np.float32)
    ids = [f"c{i:07d}" for i in range(n)]
    chunks = [Chunk(ids[i], f"text {i}", {"source": f"d{i % 100}"}, matrix[i]) for i in range(n)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ctx = StoreContext(Database(Path(tmp) / "b.db"))
        for name, cls in (("eddi-rag in-memory", InMemoryStore), ("eddi-rag sqlite", SqliteStore)):
            store = cls("bench", {}, ctx)
            for start in range(0, n, 10000):
                store.upsert(chunks[start : start + 10000])
            store.search(qs[0], 5)  # warm (sqlite loads its matrix once)
            rows.append((name, *_latency(lambda q, s=store: s.search(q, 5), qs)))
        flt = InMemoryStore("bench", {}, ctx)
        rows.append(("eddi-rag in-memory, filtered (1% match)", *_latency(lambda q: flt.search(q, 5, where={"source": "d7"}), qs[:20])))
    texts = [f"text {i}" for i in range(n)]
    lc = InMemoryVectorStore(_Lookup(dict(zip(texts, matrix.tolist()))))
    lc.add_texts(texts, ids=ids)
    rows.append(("LangChain InMemoryVectorStore", *_latency(lambda q: lc.similarity_search_by_vector(q.tolist(), k=5), qs)))
    base = rows[-1][1]
    print(f"\n## Top-5 search, {n:,} chunks × {dim}-d ({queries} queries)")
    print("| store | median ms | p95 ms | speed-up vs LangChain (median) |\n|---|---|---|---|")
    for name, med, p95 in rows:
        print(f"| {name} | {med:.2f} | {p95:.2f} | {base / med:.1f}× |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000])
    args = parser.parse_args()
    bench_ingestion(load_texts(args.corpus, args.docs))
    for n in args.sizes:
        bench_search(n)


if __name__ == "__main__":
    main()
