"""Retrieval quality on BEIR-format data: nDCG@10, Recall@10/100 and MRR@10 (ir-measures).

    eddi-rag eval --corpus corpus.jsonl --queries queries.jsonl --qrels qrels/test.tsv --mode hybrid

Documents are embedded whole (title + text, truncated by the model at 256 tokens) with the offline
model; vectors are cached on disk, so a second run embeds nothing. Modes: ``vector`` (cosine over
the in-memory store), ``keyword`` (BM25, bm25s), ``hybrid`` (weighted 0.7/0.3 of min-max
normalised scores) and ``rrf`` (reciprocal rank fusion, k=60).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import ir_measures
import numpy as np
from ir_measures import RR, R, nDCG

from eddi_rag.db import Database
from eddi_rag.embeddings.cache import CachedEmbeddings, SqliteVectorCache
from eddi_rag.embeddings.local import LocalOnnxEmbeddings
from eddi_rag.retrieval.fusion import reciprocal_rank, weighted
from eddi_rag.stores.base import Chunk, StoreContext
from eddi_rag.stores.bm25 import Bm25Index
from eddi_rag.stores.memory import InMemoryStore

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
        model, SqliteVectorCache(Database(Path(cache_dir) / "eval-embeddings.db")), "local", model.model_name, None)
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
