"""Keyword search at scale (issue 34, point 1): the candidates for the default store's keyword half, side by side
in ONE run, before choosing.

    .venv/bin/python benchmarks/bench_keyword.py [--sizes 25885 100000 1000000] [--queries 60] [--data ../shared/data/nfcorpus]

The chunks are NFCorpus's abstracts cut into pieces of about 300 characters at sentence ends (one copy of the
corpus is 25,885); a larger size repeats the corpus, each copy under its own ids. Every search asks for
15 results (5 × the retriever's overfetch of 3) under the filter every query carries (private / expired /
switched-off chunks left out; nothing is filtered out here, as in a KB without them). Questions: NFCorpus's test
queries of up to 30 words. Candidates:

* **fts5 bm25() (before)**: the ``sqlite`` store's keyword search until issue 34 (the FTS5 index it still keeps,
  ``bm25()`` over every matching row, joined to the chunk rows and filtered before ordering);
* **sqlite store (tantivy)**: the ``sqlite`` store's ``keyword_search`` now (``stores/embedded/keywords.py``);
* **fts5, ranked first**: the same FTS5 index, ordered by ``rank`` alone in a subquery bounded to 4 × k rows, then
  joined and filtered (more rows asked when the filter leaves fewer than k);
* **fts5, rarest terms**: the same, matching only the query's 6 rarest terms (by the index's own document counts);
* **bm25s**: the in-memory store's path, an index held in memory (built once; its build time is shown);
* **tantivy**: a Lucene-style index in memory (tantivy-py), BM25, English stemming.

The build column: writing the rows into the store (its FTS5 index with them); for the store's tantivy index, its
build at the first keyword search; for bm25s and tantivy alone, their index. Memory: what the store's index and
bm25s's add to this process's resident memory. Prints p50 / p95 per size and, at the
first size, nDCG@10 on NFCorpus's test qrels for the keyword half alone (a
chunk's hit counts for its abstract, first hit kept) and the overlap of each candidate's top 10 with today's.
Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import Stemmer  # noqa: E402

from eddi_rag.backends import registry  # noqa: E402
from eddi_rag.retrieval.retriever import POOL, scope  # noqa: E402
from eddi_rag.state.sqlite import Database  # noqa: E402
from eddi_rag.stores.base import Chunk, StoreContext  # noqa: E402
from eddi_rag.stores.embedded import sqlite as sqlite_store  # noqa: E402
from eddi_rag.stores.embedded.bm25 import Bm25Index  # noqa: E402

T = TypeVar("T")
K = POOL  # what a hybrid search asks each side for
PORTER = Stemmer.Stemmer("porter")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def rss_mb() -> float:
    """This process's resident memory (what an index held in memory adds to it)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 1e6


def pieces(text: str, size: int = 300) -> list[str]:
    out, current = [], ""
    for sentence in SENTENCE_END.split(text):
        if current and len(current) + len(sentence) > size:
            out.append(current)
            current = ""
        current = f"{current} {sentence}".strip()
    return out + ([current] if current else [])


def corpus(data: Path) -> list[tuple[str, str, str]]:
    """(chunk id, abstract id, text) for one copy of the corpus."""
    rows = []
    for line in (data / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        for i, text in enumerate(pieces(f"{doc['title']}. {doc['text']}")):
            rows.append((f"{doc['_id']}#{i}", doc["_id"], text))
    return rows


def queries(data: Path, n: int) -> tuple[list[tuple[str, str]], dict[str, dict[str, int]]]:
    qrels: dict[str, dict[str, int]] = {}
    for line in (data / "qrels" / "test.tsv").read_text().splitlines()[1:]:
        q, d, score = line.split("\t")
        qrels.setdefault(q, {})[d] = int(score)
    asked = [json.loads(line) for line in (data / "queries.jsonl").read_text().splitlines()]
    asked = [(q["_id"], q["text"]) for q in asked if q["_id"] in qrels and len(q["text"].split()) <= 30]
    return asked[:n], qrels


def ndcg10(ranked_docs: list[str], rels: dict[str, int]) -> float:
    gain = sum((2 ** rels.get(d, 0) - 1) / math.log2(i + 2) for i, d in enumerate(ranked_docs[:10]))
    ideal = sum((2 ** r - 1) / math.log2(i + 2) for i, r in enumerate(sorted(rels.values(), reverse=True)[:10]))
    return gain / ideal if ideal else 0.0


def timed(search: Callable[[str], T], texts: list[str]) -> tuple[float, float, list[T]]:
    """p50 and p95 in ms of ``search`` over ``texts`` (the first three asked once before, to warm), and what it found."""
    for text in texts[:3]:
        search(text)
    times, results = [], []
    for text in texts:
        t0 = time.perf_counter()
        results.append(search(text))
        times.append((time.perf_counter() - t0) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], results


def fts_before(store, text: str, k: int, node) -> list[str]:
    planned = sqlite_store.keyword_query("kb_chunks", store.kb_id, text, k, node)
    return [r["id"] for r in store.db.query(*planned)] if planned else []


def fts_first(store, text: str, k: int, node) -> list[str]:
    """FTS5 ordered by rank alone in a bounded subquery, then joined and filtered; asked again for more rows when
    the filter left fewer than k."""
    terms = re.findall(r"\w+", text)
    if not terms:
        return []
    fts = sqlite_store.fts_name("kb_chunks", store.kb_id)
    sql, params = sqlite_store.to_sqlite(node, column="c.metadata")
    limit = 4 * k
    while True:
        rows = store.db.query(
            f"SELECT c.id FROM (SELECT rowid, rank FROM {fts} WHERE {fts} MATCH ? ORDER BY rank LIMIT ?) t "
            f"JOIN kb_chunks c ON c.rowid = t.rowid WHERE c.kb = ? AND {sql} ORDER BY t.rank, c.id LIMIT ?",
            [" OR ".join(f'"{t}"' for t in terms), limit, store.kb_id, *params, k])
        if len(rows) >= k or limit >= 1 << 20:
            return [r["id"] for r in rows]
        limit *= 8


def rarest(store, text: str, keep: int = 6) -> str:
    """The query's ``keep`` rarest terms, by the FTS5 index's own document counts (fts5vocab)."""
    terms = list(dict.fromkeys(t.lower() for t in re.findall(r"\w+", text)))
    vocab = sqlite_store.fts_name("kb_chunks", store.kb_id) + "_v"
    stems = [PORTER.stemWord(t) for t in terms]  # (FTS5's porter tokenizer: its terms are stems)
    counts = {r["term"]: r["doc"] for r in store.db.query(
        f"SELECT term, doc FROM {vocab} WHERE term IN ({','.join('?' * len(stems))})", stems)} if stems else {}
    known = sorted((t for t in terms if PORTER.stemWord(t) in counts), key=lambda t: counts[PORTER.stemWord(t)])
    return " ".join(known[:keep])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/nfcorpus"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[25885, 100000, 1000000])
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    data = Path(args.data)
    one = corpus(data)
    asked, qrels = queries(data, args.queries)
    node = scope(None, None, time.time())
    print(f"NFCorpus: {len(one)} chunks a copy; {len(asked)} queries of up to 30 words; k = {K}\n")
    print("| chunks | candidate | build s | memory MB | p50 ms | p95 ms | nDCG@10 | top-10 overlap with FTS5's |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for size in args.sizes:
        rows = [(f"{cid}~{copy}" if copy else cid, doc, text)
                for copy in range(math.ceil(size / len(one))) for cid, doc, text in one][:size]
        doc_of = {cid: doc for cid, doc, _ in rows}
        with tempfile.TemporaryDirectory() as tmp:
            ctx = StoreContext(Database(Path(tmp) / "kb.db"), Path(tmp))
            t0 = time.perf_counter()
            store = registry.load(registry.STORES, "sqlite")("bench", {}, ctx)
            for start in range(0, len(rows), 10_000):
                store.upsert([Chunk(cid, text, {"document_id": doc}, [1.0, 0.0]) for cid, doc, text in rows[start:start + 10_000]])
            build_sqlite = time.perf_counter() - t0
            t0, m0 = time.perf_counter(), rss_mb()
            store.keyword_search("warm", 1)  # (its index: built at the first keyword search)
            build_store, memory = time.perf_counter() - t0, {"sqlite store (tantivy)": rss_mb() - m0}
            fts = sqlite_store.fts_name("kb_chunks", store.kb_id)
            store.db.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {fts}_v USING fts5vocab({fts}, 'row')")

            t0, m0 = time.perf_counter(), rss_mb()
            bm25 = Bm25Index([cid for cid, _, _ in rows], [text for _, _, text in rows])
            build_bm25s = time.perf_counter() - t0
            memory["bm25s (in memory)"] = rss_mb() - m0
            candidates: list[tuple[str, float, Callable[[str], list[str]]]] = [
                ("fts5 bm25() (before)", build_sqlite, lambda q: fts_before(store, q, K, node)),
                ("sqlite store (tantivy)", build_store, lambda q: [h.id for h in store.keyword_search(q, K, where=node)]),
                ("fts5, ranked first", build_sqlite, lambda q: fts_first(store, q, K, node)),
                ("fts5, rarest 6 terms", build_sqlite, lambda q: fts_first(store, rarest(store, q), K, node)),
                ("bm25s (in memory)", build_bm25s, lambda q: [i for i, _ in bm25.search(q, K)]),
            ]
            try:
                import tantivy

                t0 = time.perf_counter()
                schema = tantivy.SchemaBuilder().add_text_field("id", stored=True, tokenizer_name="raw") \
                    .add_text_field("text", tokenizer_name="en_stem").build()
                index = tantivy.Index(schema)
                writer = index.writer(heap_size=200_000_000, num_threads=1)
                for cid, _, text in rows:
                    writer.add_document(tantivy.Document(id=cid, text=text))
                writer.commit()
                index.reload()
                searcher = index.searcher()
                build_tantivy = time.perf_counter() - t0

                def tantivy_search(q: str) -> list[str]:
                    words = re.findall(r"\w+", q)
                    if not words:
                        return []
                    parsed = index.parse_query(" OR ".join(words), ["text"])
                    return [searcher.doc(address)["id"][0] for _, address in searcher.search(parsed, K).hits]

                candidates.append(("tantivy (in memory)", build_tantivy, tantivy_search))
            except ImportError:
                print("(tantivy is not installed: pip install tantivy to measure it)", file=sys.stderr)
            today: list[list[str]] = []
            for name, build, search in candidates:
                p50, p95, results = timed(search, [text for _, text in asked])
                if name == "fts5 bm25() (before)":
                    today = results
                quality = overlap = ""
                if size == args.sizes[0]:
                    scores = []
                    for (qid, _), ids in zip(asked, results):
                        docs = list(dict.fromkeys(doc_of[i] for i in ids))
                        scores.append(ndcg10(docs, qrels[qid]))
                    quality = f"{statistics.mean(scores):.4f}"
                    shared = [len(set(a[:10]) & set(b[:10])) / min(10, len(b)) for a, b in zip(results, today) if b]
                    overlap = f"{statistics.mean(shared):.2f}"
                held = f"{memory[name]:.0f}" if name in memory else ""
                print(f"| {size:,} | {name} | {build:.1f} | {held} | {p50:.2f} | {p95:.2f} | {quality} | {overlap} |", flush=True)
            store.drop()
            ctx.close()


if __name__ == "__main__":
    main()
