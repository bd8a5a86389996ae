"""Answers that do not depend on k (issue 45, point 1): the size of each side's candidate pool in a hybrid search.

    .venv/bin/python benchmarks/bench_ranking.py [--data ../shared/data/claude-docs-qa] [--beir ../shared/data/nfcorpus]
        [--pools 3k 20 50 100]

One knowledge base with every default (sqlite, markdown chunks, hybrid weighted, neighbours 4) over claude-docs-qa's
45 pages. For each pool size (``3k``: three candidates per result asked for, yesterday's rule) and each fusion it
prints: how many of the 100 questions have the same first result at k=1 as at k=5 (the issue's goal: at least 98),
the same first three at k=3 as at k=10, hit@5 by the set's README metric (bench_docs_qa), and the median query time
through the retriever; with ``--beir``, NFCorpus's nDCG@10 through the pipeline (``eddi-rag eval --pipeline``'s way).
Asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_docs_qa import BASE, Bench, question_set  # noqa: E402

from eddi_rag.api.app import create_app  # noqa: E402
from eddi_rag.retrieval import retriever  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402
from eddi_rag.tools.eval import evaluate_pipeline, load_beir  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def use_pool(pool: str) -> None:
    """``3k``: three per result asked for (the rule before issue 45); a number: that many whatever k is."""
    retriever.pool_size = (lambda k: 3 * k) if pool == "3k" else (lambda k, n=int(pool): max(n, k))  # type: ignore[assignment]


def agreement(runtime: Runtime, kb: str, questions: list[str], small: int, large: int) -> tuple[int, float]:
    """How many questions' first ``small`` results at k=small equal the first ``small`` at k=large; median ms a query."""
    same, times = 0, []
    for q in questions:
        start = time.perf_counter()
        few = [h.id for h in runtime.query(kb, q, max_results=small)]
        times.append(time.perf_counter() - start)
        same += few == [h.id for h in runtime.query(kb, q, max_results=large)][:small]
    return same, statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=SHARED / "claude-docs-qa")
    parser.add_argument("--beir", type=Path, default=None)
    parser.add_argument("--pools", nargs="*", default=["3k", "20", "50", "100"])
    parser.add_argument("--budget", type=int, default=12000)
    parser.add_argument("--min-score", type=float, default=None, help="the knowledge base's minScore (default: its default)")
    args = parser.parse_args()
    qa, pages = question_set(args.data)
    questions = [q["question"] for q in qa]
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as runtime, TestClient(create_app(runtime)) as client:
        r = client.post(BASE, json={"name": "docs", "embeddingProvider": "local", "storeType": "sqlite",
                                    **({} if args.min_score is None else {"minScore": args.min_score})})
        kb = r.headers["Location"].split("/")[-1].split("?")[0]
        client.post(f"{BASE}/{kb}/ingest", files=[("file", (p.name, p.read_bytes(), "text/markdown")) for p in pages])
        runtime.jobs.wait_idle()
        bench = Bench(client, qa, args.budget)
        for fusion in ("weighted", "rrf"):
            bench.configure(kb, {"fusion": fusion})
            for pool in args.pools:
                use_pool(pool)
                one, ms = agreement(runtime, kb, questions, 1, 5)
                three, _ = agreement(runtime, kb, questions, 3, 10)
                rows.append([fusion, pool, one, three, bench.score(kb), ms])
                print(rows[-1], file=sys.stderr, flush=True)
    beir: dict[tuple[str, str], float] = {}
    if args.beir:
        data = load_beir(args.beir / "corpus.jsonl", args.beir / "queries.jsonl", args.beir / "qrels" / "test.tsv")
        with tempfile.TemporaryDirectory() as tmp:
            for pool in args.pools:
                use_pool(pool)
                found = evaluate_pipeline(data, ["hybrid", "rrf"], Path(tmp), {"chunkStrategy": "markdown"})
                beir["weighted", pool], beir["rrf", pool] = found["hybrid"]["nDCG@10"], found["rrf"]["nDCG@10"]
                print(pool, beir["weighted", pool], beir["rrf", pool], file=sys.stderr, flush=True)
    print("| fusion | pool a side | same first at k=1 and k=5 | same first 3 at k=3 and k=10 | hit@5 | ms a query (k=1) |"
          + (" NFCorpus nDCG@10 |" if beir else ""))
    print("|---|---|---:|---:|---:|---:|" + ("---:|" if beir else ""))
    for fusion, pool, one, three, hit, ms in rows:
        label = "3 × k (before)" if pool == "3k" else pool
        print(f"| {fusion} | {label} | {one} | {three} | {hit:.2f} | {ms:.1f} |"
              + (f" {beir[fusion, pool]:.4f} |" if beir else ""))


if __name__ == "__main__":
    main()
