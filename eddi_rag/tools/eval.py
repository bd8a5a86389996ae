"""Retrieval quality on BEIR-format data: nDCG@10, Recall@10/100 and MRR@10 (ir-measures).

    eddi-rag eval --corpus corpus.jsonl --queries queries.jsonl --qrels qrels/test.tsv --mode hybrid

Documents are embedded whole (title + text, truncated by the model at 256 tokens) with the offline
model; vectors are cached on disk, so a second run embeds nothing. Modes: ``vector`` (cosine over
the in-memory store), ``keyword`` (BM25, bm25s), ``hybrid`` (weighted 0.7/0.3 of min-max
normalised scores) and ``rrf`` (reciprocal rank fusion, k=60).

``--pipeline`` measures the product end to end instead: the ingest contract with a chunking
strategy, the Retriever in each mode, each document ranked by its best chunk.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ir_measures
import numpy as np
from ir_measures import RR, R, nDCG

from eddi_rag.embeddings.cache import CachedEmbeddings, StateVectorCache
from eddi_rag.embeddings.local import LocalOnnxEmbeddings
from eddi_rag.retrieval.fusion import reciprocal_rank, weighted
from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import Chunk, StoreContext
from eddi_rag.stores.embedded.bm25 import Bm25Index
from eddi_rag.stores.embedded.memory import InMemoryStore

MODES = ("vector", "keyword", "hybrid", "rrf")
MEASURES = [nDCG @ 10, R @ 10, R @ 100, RR @ 10]
DEPTH = 100


@dataclass
class Beir:
    docs: dict[str, str]
    queries: dict[str, str]
    qrels: list[ir_measures.Qrel]


def load_beir(corpus: Path, queries: Path, qrels: Path) -> Beir:
    docs = {}
    with corpus.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            docs[str(d["_id"])] = (d.get("title", "") + "\n\n" + d.get("text", "")).strip()
    judged: list[ir_measures.Qrel] = []
    with qrels.open(encoding="utf-8") as f:
        for row in csv.reader(f, delimiter="\t"):
            if row and row[0] != "query-id":
                judged.append(ir_measures.Qrel(row[0], row[1], int(row[2])))
    wanted = {q.query_id for q in judged}
    texts = {}
    with queries.open(encoding="utf-8") as f:
        for line in f:
            q = json.loads(line)
            if str(q["_id"]) in wanted:
                texts[str(q["_id"])] = q["text"]
    return Beir(docs, texts, judged)


def evaluate(data: Beir, modes: list[str], cache_dir: Path | None = None,
             progress: Callable[[str], None] = lambda _: None) -> dict[str, dict[str, float]]:
    ids = list(data.docs)
    model = LocalOnnxEmbeddings()
    embedder = model if cache_dir is None else CachedEmbeddings(
        model, StateVectorCache(Database(Path(cache_dir) / "eval-embeddings.db")), "local", model.model_name, None)
    progress(f"embedding {len(ids)} documents (cached after the first run)...")
    vectors = np.asarray(embedder.embed_documents([data.docs[i] for i in ids]), dtype=np.float32)
    store = InMemoryStore("eval", {}, StoreContext(Database()))
    store.upsert([Chunk(i, "", {}, v) for i, v in zip(ids, vectors)])
    bm25 = Bm25Index(ids, [data.docs[i] for i in ids]) if set(modes) - {"vector"} else None
    progress(f"searching {len(data.queries)} queries...")
    qids = list(data.queries)
    qvecs = embedder.embed_documents([data.queries[q] for q in qids]) if set(modes) - {"keyword"} else None
    runs: dict[str, list[ir_measures.ScoredDoc]] = {m: [] for m in modes}
    for n, qid in enumerate(qids):
        vec = [(h.id, h.similarity) for h in store.search(qvecs[n], DEPTH)] if qvecs is not None else []
        kw = bm25.search(data.queries[qid], DEPTH) if bm25 is not None else []
        ranked = {"vector": vec, "keyword": kw, "hybrid": weighted(vec, kw)[:DEPTH], "rrf": reciprocal_rank(vec, kw)[:DEPTH]}
        for mode in modes:
            runs[mode] += [ir_measures.ScoredDoc(qid, doc, score) for doc, score in ranked[mode]]
    return {mode: {str(m): float(v) for m, v in ir_measures.calc_aggregate(MEASURES, data.qrels, runs[mode]).items()}
            for mode in modes}


def format_table(results: dict[str, dict[str, float]]) -> str:
    names = [str(m) for m in MEASURES]
    lines = ["| mode | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    lines += [f"| {mode} | " + " | ".join(f"{scores[n]:.4f}" for n in names) + " |" for mode, scores in results.items()]
    return "\n".join(lines)


def evaluate_pipeline(data: Beir, modes: list[str], cache_dir: Path, chunking: dict[str, Any],
                      progress: Callable[[str], None] = lambda _: None) -> dict[str, dict[str, float]]:
    """The same measures through the product itself: documents ingested by the ingest contract
    (chunked per ``chunking``, embedded, into a sqlite store kept in ``cache_dir``), queries answered
    by the Retriever in each search mode, and a document ranked by its best chunk."""
    from eddi_rag import Document
    from eddi_rag.runtime import Runtime
    from eddi_rag.verbs.search import SearchRequest

    runtime = Runtime(Path(cache_dir) / "pipeline")
    try:
        digest = hashlib.sha256(json.dumps([sorted(data.docs), chunking], sort_keys=True).encode()).hexdigest()[:12]
        kb_id = f"eval-{digest}"
        raw = {"name": kb_id, "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0, "recencyWindow": 0,
               **chunking}
        if not runtime.catalog.exists("rags", kb_id):
            runtime.saving.create("rags", raw, id=kb_id)
        if not runtime.documents.list(kb_id, max_chunks=1)["documents"]:
            ids = list(data.docs)
            for start in range(0, len(ids), 500):
                progress(f"ingesting documents {start + 1}-{min(start + 500, len(ids))} of {len(ids)} ({chunking})...")
                result = runtime.ingesting.batch([Document(i, data.docs[i]) for i in ids[start : start + 500]], kb_id)
                if result.errors:
                    raise RuntimeError(f"ingestion failed: {result.errors[:3]}")
        runs: dict[str, list[ir_measures.ScoredDoc]] = {m: [] for m in modes}
        progress(f"searching {len(data.queries)} queries...")
        for qid, text in data.queries.items():
            for mode in modes:
                hits = runtime.search.hits(SearchRequest(kb_id, text, k=3 * DEPTH, min_score=0.0,
                                                         mode="weighted" if mode == "hybrid" else mode))
                ranked = list(dict.fromkeys(h.metadata["document_id"] for h in hits))[:DEPTH]
                runs[mode] += [ir_measures.ScoredDoc(qid, doc, float(DEPTH - rank)) for rank, doc in enumerate(ranked)]
        return {mode: {str(m): float(v) for m, v in ir_measures.calc_aggregate(MEASURES, data.qrels, runs[mode]).items()}
                for mode in modes}
    finally:
        runtime.close()
