"""The fleet's keyword search (issue 46, point 1): PostgreSQL's own full-text search against the embedded store's BM25
index kept beside PostgreSQL, side by side in ONE run, on a real PostgreSQL 16 + pgvector (pgserver, as the tests).

    .venv/bin/python benchmarks/bench_fleet_keyword.py [--sizes 25885 100000] [--queries 60] [--data ../shared/data/nfcorpus]

The chunks are NFCorpus's abstracts in pieces of about 300 characters (bench_keyword's; a larger size repeats the
corpus under new ids), written through the ``pgvector`` store. Every search asks for 50 results (a hybrid search's
pool a side) under the filter every query carries (bench_keyword's). Candidates:

* **ts_rank_cd (before)**: the ``pgvector`` store's keyword search until issue 46, ``ts_rank_cd`` over every row
  matching any of the words (the GIN-indexed ``tsv`` column), as the store ran it;
* **ts_rank_cd, rarest 6 terms**: the same, matching only the question's 6 rarest lexemes (PostgreSQL's own counts,
  ``ts_stat`` once over the table: not a candidate a server could keep current cheaply, measured to see the bound);
* **pgvector store (BM25 beside PostgreSQL)**: the store's keyword search now (``stores/pgvector_keywords.py``);
* **sqlite store (tantivy)**: the embedded default's keyword search over the same chunks, the quality to keep.

Prints p50 / p95, and at the first size nDCG@10 on NFCorpus's test qrels (a chunk's hit counts for its abstract);
the build column is the index's first build in a process, and the catch-up rows the time the next search takes after
another process wrote one document (10 chunks) or 1,000 chunks. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_keyword import K, corpus, ndcg10, queries, timed  # noqa: E402
from psycopg import sql as pgsql  # noqa: E402

from eddi_rag.retrieval.retriever import scope  # noqa: E402
from eddi_rag.state.sqlite import Database  # noqa: E402
from eddi_rag.stores import filters  # noqa: E402
from eddi_rag.stores.base import Chunk, StoreContext  # noqa: E402
from eddi_rag.stores.embedded.sqlite import SqliteStore  # noqa: E402
from eddi_rag.stores.pgvector import PgVectorStore, to_postgres  # noqa: E402


def ts_rank(store: PgVectorStore, text: str, k: int, node, terms: list[str] | None = None) -> list[str]:
    """The store's keyword search as it was before issue 46 (``ts_rank_cd`` over every match)."""
    terms = terms if terms is not None else re.findall(r"\w+", text.lower())
    if not terms:
        return []
    cond, params = to_postgres(node)
    query = pgsql.SQL("SELECT id FROM {t}, to_tsquery('english', %s) AS q WHERE tsv @@ q AND {c} "
                      "ORDER BY ts_rank_cd(tsv, q) DESC, id LIMIT %s").format(t=store._ident, c=cond)
    return [r[0] for r in store._conn.execute(query, [" | ".join(terms), *params, k]).fetchall()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/nfcorpus"))
    parser.add_argument("--sizes", type=int, nargs="+", default=[25885, 100000])
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    from tests.support.services import postgres

    data = Path(args.data)
    one = corpus(data)
    asked, qrels = queries(data, args.queries)
    node = filters.node(scope(None, None, time.time()))
    print(f"NFCorpus: {len(one)} chunks a copy; {len(asked)} queries of up to 30 words; k = {K}\n")
    print("| chunks | candidate | build s | p50 ms | p95 ms | nDCG@10 |")
    print("|---:|---|---:|---:|---:|---:|")
    with postgres() as url, tempfile.TemporaryDirectory() as tmp:
        ctx = StoreContext(Database(Path(tmp) / "kb.db"), Path(tmp))
        for size in args.sizes:
            rows = [(f"{cid}~{copy}" if copy else cid, doc, text)
                    for copy in range(math.ceil(size / len(one))) for cid, doc, text in one][:size]
            doc_of = {cid: doc for cid, doc, _ in rows}
            pg = PgVectorStore(f"bench-{size}", {"url": url, "index": "none"}, ctx)
            embedded = SqliteStore(f"bench-{size}", {}, ctx)
            for start in range(0, len(rows), 10_000):
                batch = [Chunk(cid, text, {"document_id": doc}, [1.0, 0.0]) for cid, doc, text in rows[start:start + 10_000]]
                pg.upsert(batch)
                embedded.upsert(batch)
            t0 = time.perf_counter()
            pg.keyword_search("warm", 1)
            build_pg = time.perf_counter() - t0
            t0 = time.perf_counter()
            embedded.keyword_search("warm", 1)
            build_embedded = time.perf_counter() - t0
            counts: dict[str, int] = {}
            if size == args.sizes[0]:  # the lexemes' document counts, once (for the rarest-terms bound)
                counts = {w: n for w, n in pg._conn.execute(f"SELECT word, ndoc FROM ts_stat('SELECT tsv FROM {pg.table}')").fetchall()}

            def rarest(text: str, keep: int = 6) -> list[str]:
                lexemes = [r[0] for r in pg._conn.execute("SELECT unnest(tsvector_to_array(to_tsvector('english', %s)))", [text]).fetchall()]
                return sorted((w for w in lexemes if w in counts), key=lambda w: counts[w])[:keep]

            candidates = [("ts_rank_cd (before)", "", lambda q: ts_rank(pg, q, K, node)),
                          *([("ts_rank_cd, rarest 6 terms", "", lambda q: ts_rank(pg, q, K, node, rarest(q)))] if counts else []),
                          ("pgvector store (BM25 beside PostgreSQL)", f"{build_pg:.1f}",
                           lambda q: [h.id for h in pg.keyword_search(q, K, where=node)]),
                          ("sqlite store (tantivy)", f"{build_embedded:.1f}",
                           lambda q: [h.id for h in embedded.keyword_search(q, K, where=node)])]
            for name, build, search in candidates:
                p50, p95, results = timed(search, [text for _, text in asked])
                quality = ""
                if size == args.sizes[0]:
                    scores = [ndcg10(list(dict.fromkeys(doc_of[i] for i in ids)), qrels[qid]) for (qid, _), ids in zip(asked, results)]
                    quality = f"{statistics.mean(scores):.4f}"
                print(f"| {size:,} | {name} | {build} | {p50:.2f} | {p95:.2f} | {quality} |", flush=True)
            replica = PgVectorStore(f"bench-{size}", {"url": url + "&application_name=replica"}, ctx)  # another process
            for written in (10, 1000):
                times = []
                for n in range(5):
                    replica.upsert([Chunk(f"new-{written}-{n}-{i}", f"strudel recipe {i}", {"document_id": "new"}, [0.0, 1.0])
                                    for i in range(written)])
                    t0 = time.perf_counter()
                    pg.keyword_search(asked[n][1], K, where=node)
                    times.append((time.perf_counter() - t0) * 1000)
                print(f"| {size:,} | pgvector store: the next search after another process wrote {written} chunks | | "
                      f"{statistics.median(times):.2f} | {max(times):.2f} | |", flush=True)
            replica.close()
            pg.drop()
            pg.close()
            embedded.drop()


if __name__ == "__main__":
    main()
