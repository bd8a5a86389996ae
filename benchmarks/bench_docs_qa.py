"""claude-docs-qa through REST: chunking × search mode × contextExpansion, with the naive
whole-``##``-section baselines in the same run (the data set's README defines the metric).

    .venv/bin/python benchmarks/bench_docs_qa.py [--data ../shared/data/claude-docs-qa] [--budget 12000]

Every figure is hit@5: for each question the product's top 5 results, the text that would reach the
model for each (its passage: one per document, in the order returned, grown within the context
budget the query names), joined and cut at ``budget`` characters; a hit when it holds at least half
of the distinct words of the reference passages.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime

BASE = "/ragstore/rags"
WORD = re.compile(r"[a-z0-9]+")
MODES = {"vector": {"searchMode": "vector"}, "keyword": {"searchMode": "keyword"},
         "rrf": {"searchMode": "hybrid", "fusion": "rrf"}, "weighted": {"searchMode": "hybrid", "fusion": "weighted"}}
CHUNKINGS = {
    "markdown (256 tokens)": {"chunkStrategy": "markdown"},
    "recursive 512/64": {"chunkStrategy": "recursive", "chunkSize": 512, "chunkOverlap": 64},
    "paragraph 512": {"chunkStrategy": "paragraph", "chunkSize": 512, "chunkOverlap": 0},
}
EXPANSIONS = {"none": {"contextExpansion": "none"},
              "neighbors 1": {"contextExpansion": "neighbors", "expansionNeighbors": 1, "maxPassageChars": 12000},
              "neighbors 4": {"contextExpansion": "neighbors", "expansionNeighbors": 4, "maxPassageChars": 12000},
              "section": {"contextExpansion": "section", "maxPassageChars": 12000},
              "section, 4000 per passage": {"contextExpansion": "section", "maxPassageChars": 4000}}


def words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))


def hit(context: str, references: list[str], budget: int) -> bool:
    wanted = words("\n".join(references))
    return bool(wanted) and len(wanted & words(context[:budget])) >= 0.5 * len(wanted)


def sections(text: str) -> list[str]:
    """A page cut before every ``## `` line: the naive whole-section chunks."""
    parts = re.split(r"(?m)^(?=## )", text)
    return [p.strip() for p in parts if p.strip()]


class Bench:
    def __init__(self, client: TestClient, qa: list[dict], budget: int, k: int = 5):
        self.client, self.qa, self.budget, self.k = client, qa, budget, k

    def kb(self, name: str, config: dict) -> str:
        r = self.client.post(BASE, json={"name": name, "embeddingProvider": "local", "storeType": "sqlite",
                                         "minScore": 0, "maxResults": self.k, **config})
        assert r.status_code == 201, r.text
        return r.headers["Location"].split("/")[-1].split("?")[0]

    def configure(self, kb: str, changes: dict) -> None:
        current = self.client.get(f"{BASE}/{kb}")
        version = self.client.app.state.runtime.resources.current_version("rags", kb)
        r = self.client.put(f"{BASE}/{kb}?version={version}", json={**current.json(), **changes})
        assert r.status_code == 200, r.text

    def score(self, kb: str) -> float:
        hits = 0
        for q in self.qa:
            r = self.client.post(f"{BASE}/{kb}/query", json={"query": q["question"], "maxContextChars": self.budget})
            assert r.status_code == 200, r.text
            context = "\n\n".join(p["text"] for p in r.json()["passages"])
            hits += hit(context, q["reference_passages"], self.budget)
        return hits / len(self.qa)


def question_set(data: str | Path) -> tuple[list[dict], list[Path]]:
    """claude-docs-qa's questions (qa.jsonl) and its pages (docs/*.md)."""
    data = Path(data)
    qa = [json.loads(line) for line in (data / "qa.jsonl").read_text().splitlines() if line.strip()]
    return qa, sorted((data / "docs").glob("*.md"))


def arguments(description: str) -> argparse.ArgumentParser:
    """The options every claude-docs-qa benchmark takes: ``--data`` and ``--budget``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/claude-docs-qa"))
    parser.add_argument("--budget", type=int, default=12000)
    return parser


def main() -> None:
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--chunking", action="append", choices=list(CHUNKINGS), help="repeatable; default: all")
    parser.add_argument("--mode", action="append", choices=list(MODES), help="repeatable; default: all")
    parser.add_argument("--defaults", action="store_true",
                        help="also a knowledge base that names nothing but its model and store: what a user who does not tune gets")
    args = parser.parse_args()
    qa, pages = question_set(args.data)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        runtime = Runtime(tmp)
        with TestClient(create_app(runtime)) as client:
            bench = Bench(client, qa, args.budget)
            rows = []
            # The naive baseline: every whole ## section a document of one chunk (the model truncates it).
            naive = bench.kb("naive sections", {"chunkStrategy": "recursive", "chunkSize": 100000, "chunkOverlap": 0})
            docs = [{"document_id": f"{p.name}#{i}", "text": s, "source": p.name}
                    for p in pages for i, s in enumerate(sections(p.read_text()))]
            started = time.perf_counter()
            r = client.post(f"{BASE}/{naive}/documents", json={"documents": docs}).json()
            say(f"naive: {r['chunk_count']} chunks in {time.perf_counter() - started:.1f} s")
            for mode, cfg in MODES.items():
                bench.configure(naive, cfg)
                rows.append(("whole ## sections (naive)", r["chunk_count"], mode, "none", bench.score(naive)))
                say(" | ".join(map(str, rows[-1])))
            if args.defaults:  # nothing named: the product's defaults, minScore and maxResults included
                r = client.post(BASE, json={"name": "defaults", "embeddingProvider": "local", "storeType": "sqlite"})
                kb = r.headers["Location"].split("/")[-1].split("?")[0]
                config = runtime.rag_config(kb)
                files = [("file", (p.name, p.read_bytes(), "text/markdown")) for p in pages]
                client.post(f"{BASE}/{kb}/ingest", files=files)
                runtime.jobs.wait_idle()
                count = runtime.stores.get(kb, config).count()
                described = f"{config.chunkStrategy}, {config.searchMode} {config.fusion}, minScore {config.minScore}"
                rows.append((f"the defaults ({described})", count, "defaults", f"{config.contextExpansion} {config.expansionNeighbors}",
                             bench.score(kb)))
                say(" | ".join(map(str, rows[-1])))
            for chunking in args.chunking or list(CHUNKINGS):
                kb = bench.kb(chunking, CHUNKINGS[chunking])
                started = time.perf_counter()
                files = [("file", (p.name, p.read_bytes(), "text/markdown")) for p in pages]
                jobs = client.post(f"{BASE}/{kb}/ingest", files=files).json()["ingestions"]
                runtime.jobs.wait_idle()
                failed = [j for j in jobs if client.get(f"{BASE}/{kb}/ingestion/{j['ingestionId']}/status").json()["status"] != "completed"]
                assert not failed, failed
                count = runtime.stores.get(kb, runtime.rag_config(kb)).count()
                say(f"{chunking}: {count} chunks in {time.perf_counter() - started:.1f} s")
                for mode, cfg in ((m, MODES[m]) for m in args.mode or MODES):
                    for expansion, ecfg in EXPANSIONS.items():
                        bench.configure(kb, {**cfg, **ecfg})
                        rows.append((chunking, count, mode, expansion, bench.score(kb)))
                        say(" | ".join(map(str, rows[-1])))
        runtime.close()
    print(f"claude-docs-qa: {len(qa)} questions, {len(pages)} pages, hit@5 within {args.budget} characters\n")
    print("| chunking | chunks | search | contextExpansion | hit@5 |")
    print("|---|---:|---|---|---:|")
    for chunking, count, mode, expansion, score in rows:
        print(f"| {chunking} | {count} | {mode} | {expansion} | {score:.2f} |")


if __name__ == "__main__":
    main()
