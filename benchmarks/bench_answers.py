"""How often an offline answer holds the expected fact, on claude-docs-qa.

    .venv/bin/python benchmarks/bench_answers.py [--data ../shared/data/claude-docs-qa] [--smollm2 20]

Every page is ingested into one knowledge base (the product's defaults, hybrid search with reciprocal
rank fusion); for each question the ``## Relevant Context:`` an LLM task would inject (``/context``,
12,000 characters: the data set's budget) is answered by the extractive answer with 1, 3 and 5
sentences, beside the three sentences BM25 ranks best (its method before issue 33) and BM25's best within the
default's length (to compare like with like), and (``--smollm2 N``) by SmolLM2-135M on the first N questions. An answer *holds the fact*
when it contains at least half of the distinct content words (``[a-z0-9]+``, lower-cased, English stop
words left out) of the question's reference answer. The injected context itself is measured the same
way: the most any answer drawn from it could reach by this measure.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
import time
from pathlib import Path

from bm25s.stopwords import STOPWORDS_EN_PLUS
from fastapi.testclient import TestClient

from eddi_rag.answers.extractive import NOTHING_FOUND, extractive_answer, passages, sentences
from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime

BASE = "/ragstore/rags"
WORD = re.compile(r"[a-z0-9]+")
STOP = set(STOPWORDS_EN_PLUS)


def content_words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP}


def holds(answer: str, expected: str) -> bool:
    wanted = content_words(expected)
    return bool(wanted) and len(wanted & content_words(answer)) >= 0.5 * len(wanted)


def bm25_best(system: str, question: str, k: int = 3, chars: int | None = None) -> str:
    """The peer: the ``k`` sentences BM25 ranks best (or as many as fit in ``chars``), best first."""
    from eddi_rag.stores.embedded.bm25 import Bm25Index

    found = list(dict.fromkeys((n, s) for n, text in passages(system) for s in sentences(text)))
    ranked = Bm25Index([str(i) for i in range(len(found))], [s for _, s in found]).search(question, len(found)) if found else []
    picked: list[tuple[int, str]] = []
    for i, _ in ranked:
        n, s = found[int(i)]
        if (chars is None and len(picked) == k) or (chars is not None and picked and sum(len(p) for _, p in picked) + len(s) > chars):
            break
        picked.append((n, s))
    return " ".join(f"{s} [Source {n}]" for n, s in picked) or NOTHING_FOUND


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/claude-docs-qa"))
    parser.add_argument("--budget", type=int, default=12000)
    parser.add_argument("--smollm2", type=int, default=0, help="also answer the first N questions with SmolLM2-135M")
    args = parser.parse_args()
    data = Path(args.data)
    qa = [json.loads(line) for line in (data / "qa.jsonl").read_text().splitlines() if line.strip()]
    pages = sorted((data / "docs").glob("*.md"))
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    counts: dict[str, int] = {"context": 0, "extractive 1": 0, "extractive 3": 0, "extractive 5": 0, "bm25 3": 0, "bm25 chars": 0}
    lengths: dict[str, int] = dict.fromkeys(counts, 0)
    small: list[bool] = []
    with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as runtime, TestClient(create_app(runtime)) as client:
        r = client.post(BASE, json={"name": "docs", "embeddingProvider": "local", "storeType": "sqlite",
                                    "searchMode": "hybrid", "fusion": "rrf"})
        kb = r.headers["Location"].split("/")[-1].split("?")[0]
        started = time.perf_counter()
        client.post(f"{BASE}/{kb}/ingest", files=[("file", (p.name, p.read_bytes(), "text/markdown")) for p in pages])
        runtime.jobs.wait_idle()
        say(f"ingested {len(pages)} pages in {time.perf_counter() - started:.1f} s")
        model = None
        if args.smollm2:
            from eddi_rag.answers.smollm2 import SmolLM2ChatModel

            model = SmolLM2ChatModel(max_tokens=200)
        seconds = 0.0
        for i, q in enumerate(qa):
            found = client.post(f"{BASE}/{kb}/context", json={"query": q["question"], "maxRagContextChars": args.budget}).json()
            system = found["section"] or ""
            answers = {"context": system}
            for n in (1, 3, 5):
                answers[f"extractive {n}"] = extractive_answer(system, q["question"], n)
            answers["bm25 3"] = bm25_best(system, q["question"])
            answers["bm25 chars"] = bm25_best(system, q["question"], chars=len(answers["extractive 3"]))
            for name, text in answers.items():
                counts[name] += holds(text, q["answer"])
                lengths[name] += len(text)
            if model is not None and i < args.smollm2:
                started = time.perf_counter()
                reply = model.invoke([("system", "Answer from the context, briefly.\n\n" + system), ("user", q["question"])],
                                     temperature=0.1)
                seconds += time.perf_counter() - started
                small.append(holds(str(reply.content), q["answer"]))
    print(f"claude-docs-qa: {len(qa)} questions; an answer holds the fact when it has half of the reference answer's content words\n")
    print("| answer | holds the fact | mean length (chars) |")
    print("|---|---:|---:|")
    for name in counts:
        labels = {"context": "the injected context itself (upper bound)", "bm25 3": "BM25's best 3 sentences (before issue 33)",
                  "bm25 chars": "BM25's best sentences within the default's length"}
        label = labels.get(name) or f"extractive, {name.split()[1]} sentence(s)"
        print(f"| {label} | {counts[name] / len(qa):.2f} | {lengths[name] // len(qa)} |")
    if small:
        print(f"| SmolLM2-135M, first {len(small)} questions | {sum(small) / len(small):.2f} | ({seconds / len(small):.1f} s per answer) |")


if __name__ == "__main__":
    main()
