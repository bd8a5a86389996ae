"""The default query under document permissions against the same query read by everyone (issue 43).

    .venv/bin/python benchmarks/bench_acl.py [--size 100000] [--queries 60] [--readable 0.1] [--data ../shared/data/nfcorpus]

One knowledge base with every default (``sqlite`` store, markdown chunks, hybrid weighted search, neighbour context),
NFCorpus's abstracts as Markdown, copied up to ``--size`` chunks as ``bench_query.py`` fills it (the stand-in
embedding: only the product's own work is timed). Each document gets an ACL naming one of ten groups
(``group:g0`` … ``group:g9``), so the reader, alice in ``g0``, may read a tenth of the chunks (``--readable`` sets
the share). The same 60 NFCorpus questions are asked as ``Search.run`` (hits and the passages that reach the model)
with ``audience: AGENT_USERS`` (everyone reads all), then, on the same store, ``audience: DOCUMENT_ACL`` as alice.
Prints p50 / p95 and the ratio; the goal is at most 1.3 ×. Asserts nothing about time. Alice's rows are asked for
three times before timing and the graph of them that starts (``rows.SUBSET_GRAPH_FROM``) is waited for: the steady
state of a reader who asks again.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_query import Hashed, timed  # noqa: E402

from eddi_rag.ingest.pipeline import Document  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402
from eddi_rag.stores.base import Chunk  # noqa: E402
from eddi_rag.verbs.search import SearchRequest  # noqa: E402

GROUPS = 10


def acl_of(n: int, readable: float) -> list[str]:
    """Document ``n``'s ACL: group g0 (alice's) for a ``readable`` share of the documents, another group else."""
    return ["group:g0"] if (n * 7919) % 1000 < readable * 1000 else [f"group:g{1 + n % (GROUPS - 1)}"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/nfcorpus"))
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--readable", type=float, default=0.1, help="the share of the documents alice may read")
    args = parser.parse_args()
    data = Path(args.data)
    docs = [json.loads(line) for line in (data / "corpus.jsonl").read_text().splitlines()]
    asked = [json.loads(line)["text"] for line in (data / "queries.jsonl").read_text().splitlines()]
    asked = list(dict.fromkeys(q for q in asked if len(q.split()) <= 30))[: args.queries]
    stand_in = Hashed()
    vectors = {q: stand_in.embed_query(q) for q in asked}
    with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as rt:
        rt.embeddings.for_config = lambda config: stand_in  # (only the product's own work is timed)
        config = {"name": "bench", "embeddingProvider": "local", "storeType": "sqlite"}
        kb = rt.saving.create("rags", config).id
        t0 = time.perf_counter()
        rt.ingesting.batch([Document(d["_id"], f"# {d['title']}\n\n{d['text']}", acl=acl_of(n, args.readable))
                            for n, d in enumerate(docs)], kb)
        built = time.perf_counter() - t0
        store = rt.stores.get(kb, rt.rag_config(kb))
        one = store.get()
        number = {d["_id"]: n for n, d in enumerate(docs)}
        copy = 1
        while copy * len(one) < args.size:
            store.upsert([Chunk(f"{c.id}~{copy}", c.text, {
                **c.metadata, "document_id": f"{c.metadata['document_id']}~{copy}",
                "acl": acl_of(number[c.metadata["document_id"]] + copy * len(docs), args.readable)},
                stand_in.embed_query(c.text)) for c in one])
            copy += 1
        chunks = store.count()
        readable = store.count({"acl": {"$containsAny": ["group:g0"]}})
        rt.groups.set("default", "alice", ["g0"])

        def run(q: str) -> object:
            return rt.search.run(SearchRequest(kb, q, vector=vectors[q], user_id="alice"))

        def vector_only(q: str) -> object:
            return rt.search.run(SearchRequest(kb, q, vector=vectors[q], user_id="alice", mode="vector", expansion="none"))

        everyone = {"defaults": timed(run, asked), "vector only, no context": timed(vector_only, asked)}
        rt.saving.update("rags", kb, 1, {**config, "audience": "DOCUMENT_ACL"})
        for _ in range(3):  # alice's rows asked for three times: copied, then a graph of them built in the background
            run(asked[0])
        store._cache.table.settle()  # (the steady state a reader who asks again meets)
        acl = {"defaults": timed(run, asked), "vector only, no context": timed(vector_only, asked)}
        found = [len(rt.search.hits(SearchRequest(kb, q, vector=vectors[q], user_id="alice"))) for q in asked]
        print(f"{chunks:,} chunks ({copy} copies of NFCorpus, the first through the pipeline in {built:.0f} s); alice may "
              f"read {readable:,} ({readable / chunks:.1%}); {sum(found) / len(found):.1f} hits a question under DOCUMENT_ACL\n")
        print("| path | AGENT_USERS p50 ms | p95 ms | DOCUMENT_ACL (alice) p50 ms | p95 ms | p50 ratio |")
        print("|---|---:|---:|---:|---:|---:|")
        for name in everyone:
            (a50, a95), (d50, d95) = everyone[name], acl[name]
            print(f"| {name} | {a50:.2f} | {a95:.2f} | {d50:.2f} | {d95:.2f} | {d50 / a50:.2f} |", flush=True)


if __name__ == "__main__":
    main()
