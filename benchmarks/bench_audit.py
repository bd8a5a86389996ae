"""What the audit record costs a query (issue 59: at most 0.5 ms p50 at 100,000 chunks).

    .venv/bin/python benchmarks/bench_audit.py [--size 100000] [--queries 60] [--data ../shared/data/nfcorpus] [--postgresql]

One knowledge base with every default (``sqlite`` store, hybrid weighted search, neighbour context), NFCorpus's
abstracts copied up to ``--size`` chunks as ``bench_query.py`` fills it (the stand-in embedding: only the product's own
work is timed). The same questions are asked as ``Search.run`` with the record written (its entry: who, the documents
and chunks given, the query kept as a salted digest and its text) and without it (``search.audit`` None), in
alternating rounds on the same store. ``--postgresql``: the state (and so the record) on a PostgreSQL the benchmark
starts (the tests' pgserver, a local socket), as a fleet keeps it. Prints p50 / p95 of each and the difference.
Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_query import Hashed, timed  # noqa: E402

from eddi_rag.ingest.pipeline import Document  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402
from eddi_rag.stores.base import Chunk  # noqa: E402
from eddi_rag.verbs.search import SearchRequest  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/nfcorpus"))
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--postgresql", action="store_true", help="the state database on PostgreSQL (started here)")
    args = parser.parse_args()
    data = Path(args.data)
    docs = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines()]
    asked = [json.loads(line)["text"] for line in (data / "queries.jsonl").read_text().splitlines()]
    asked = list(dict.fromkeys(q for q in asked if len(q.split()) <= 30))[: args.queries]
    with contextlib.ExitStack() as stack:
        url = None
        if args.postgresql:
            from tests.support.services import postgres

            url = stack.enter_context(postgres())
        measure(args, docs, asked, stack.enter_context(tempfile.TemporaryDirectory()), url)


def measure(args: argparse.Namespace, docs: list[dict], asked: list[str], tmp: str, url: str | None) -> None:
    stand_in = Hashed()
    vectors = {q: stand_in.embed_query(q) for q in asked}
    with Runtime(tmp, state_url=url) as rt:
        rt.embeddings.for_config = lambda config: stand_in  # (only the product's own work is timed)
        kb = rt.saving.create("rags", {"name": "bench", "embeddingProvider": "local", "storeType": "sqlite"}).id
        rt.ingesting.batch([Document(d["_id"], f"# {d['title']}\n\n{d['text']}") for d in docs], kb)
        store = rt.stores.get(kb, rt.rag_config(kb))
        one, copy = store.get(), 1
        while copy * len(one) < args.size:
            store.upsert([Chunk(f"{c.id}~{copy}", c.text, {**c.metadata, "document_id": f"{c.metadata['document_id']}~{copy}"},
                                stand_in.embed_query(c.text)) for c in one])
            copy += 1
        chunks = store.count()
        log = rt.search.audit

        def run(q: str) -> object:
            return rt.search.run(SearchRequest(kb, q, vector=vectors[q], user_id="alice"))

        for q in asked:  # warm: the rows, the keyword index
            run(q)
        results: dict[str, list[tuple[float, float]]] = {"with the record": [], "without": []}
        for _ in range(args.rounds):
            for name, audit in (("with the record", log), ("without", None)):
                rt.search.audit = audit
                results[name].append(timed(run, asked))
        rt.search.audit = log
        entries = log.verify()["entries"]
        print(f"state on {'PostgreSQL' if url else 'SQLite'}; {chunks:,} chunks ({copy} copies of NFCorpus); "
              f"{len(asked)} questions × {args.rounds} rounds each way; "
              f"{entries:,} entries in the record, its chain verified\n")
        print("| search | p50 ms (median of rounds) | p95 ms |")
        print("|---|---:|---:|")
        medians = {}
        for name, rounds in results.items():
            p50 = sorted(r[0] for r in rounds)[len(rounds) // 2]
            p95 = sorted(r[1] for r in rounds)[len(rounds) // 2]
            medians[name] = p50
            print(f"| {name} | {p50:.2f} | {p95:.2f} |")
        print(f"\nthe record costs {medians['with the record'] - medians['without']:.2f} ms p50 a query (goal: at most 0.5)")


if __name__ == "__main__":
    main()
