"""Search in every language (issue 57): XQuAD's paragraphs and questions, one knowledge base per language.

    .venv/bin/python benchmarks/bench_xquad.py [--data ../shared/data/xquad] [--language de ...] [--cross en:de ...]
        [--mode defaults|vector|keyword ...] [--questions N] [--config '{"embeddingProvider": "local"}']

XQuAD (google-deepmind/xquad, CC BY-SA 4.0; read from ``--data``, never copied into the repository) is 240 Wikipedia
paragraphs and 1,190 questions, the same in each language. For each language present (``xquad.<lang>.json``) a
knowledge base of its paragraphs (one document each) is made through REST with every default but the local model and
the sqlite store (and what ``--config`` names), and each question asked of it (``/query``, maxResults 10, minScore 0: the ranking, not the cut-off); a
question's answer is its own paragraph. ``--cross en:de`` asks the English questions of the German paragraphs.

Prints hit@5 and MRR@10 per language and mode (``defaults``: the knowledge base's own searchMode; ``vector`` and
``keyword``: each half alone), and each language against English. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime

BASE = "/ragstore/rags"
os.environ.setdefault("EDDI_RAG_RATE_LIMIT_QUERY", "none")  # (thousands of questions a minute, one caller)
DEFAULTS = {"embeddingProvider": "local", "storeType": "sqlite"}  # what the Manager's form and bench_docs_qa name
MODES = {"defaults": {}, "vector": {"searchMode": "vector"}, "keyword": {"searchMode": "keyword"}}


def xquad(folder: Path, language: str) -> tuple[list[str], list[tuple[str, int]]]:
    """(paragraphs, [(question, index of its paragraph)]) of ``xquad.<language>.json``."""
    data = json.loads((folder / f"xquad.{language}.json").read_text(encoding="utf-8"))["data"]
    paragraphs = [p for article in data for p in article["paragraphs"]]
    return [p["context"] for p in paragraphs], [(q["question"], i) for i, p in enumerate(paragraphs) for q in p["qas"]]


def knowledge_base(client: TestClient, name: str, paragraphs: list[str], config: dict) -> str:
    r = client.post(BASE, json={"name": name, **config})
    assert r.status_code == 201, r.text
    kb = r.headers["Location"].split("/")[-1].split("?")[0]
    docs = [{"document_id": f"p{i}", "text": text, "source": f"p{i}"} for i, text in enumerate(paragraphs)]
    for start in range(0, len(docs), 60):
        r = client.post(f"{BASE}/{kb}/documents", json={"documents": docs[start:start + 60]})
        assert r.status_code in (200, 201), r.text
    return kb


def configure(client: TestClient, kb: str, body: dict) -> None:
    """Save ``body`` as the knowledge base's configuration (what it leaves out takes its default)."""
    version = client.app.state.runtime.resources.current_version("rags", kb)
    r = client.put(f"{BASE}/{kb}?version={version}", json=body)
    assert r.status_code == 200, r.text


def score(client: TestClient, kb: str, questions: list[tuple[str, int]]) -> tuple[float, float, float]:
    """(hit@5, MRR@10, ms a question)."""
    hits = reciprocal = 0.0
    started = time.perf_counter()
    for question, answer in questions:
        r = client.post(f"{BASE}/{kb}/query", json={"query": question, "maxResults": 10, "minScore": 0})
        assert r.status_code == 200, r.text
        ranked = list(dict.fromkeys(hit["metadata"]["document_id"] for hit in r.json()["results"]))[:10]
        rank = ranked.index(f"p{answer}") + 1 if f"p{answer}" in ranked else None
        hits += rank is not None and rank <= 5
        reciprocal += 1 / rank if rank else 0
    n = max(len(questions), 1)
    return hits / n, reciprocal / n, 1000 * (time.perf_counter() - started) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "xquad"))
    parser.add_argument("--language", action="append", help="repeatable; default: every xquad.<lang>.json in --data")
    parser.add_argument("--cross", action="append", default=None, help="questions:paragraphs, e.g. en:de (default en:de; '' for none)")
    parser.add_argument("--mode", action="append", choices=list(MODES), help="repeatable; default: all")
    parser.add_argument("--questions", type=int, default=0, help="ask only every n-th question (0: all)")
    parser.add_argument("--config", default="{}", help="JSON the knowledge bases name besides their name")
    args = parser.parse_args()
    folder, config = Path(args.data), {**DEFAULTS, **json.loads(args.config)}
    languages = args.language or sorted(p.name.split(".")[1] for p in folder.glob("xquad.*.json"))
    pairs = [(lang, lang) for lang in languages] + [tuple(c.split(":")) for c in (args.cross if args.cross is not None else ["en:de"]) if c]
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    results: dict[tuple[str, str], dict[str, tuple[float, float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as runtime, TestClient(create_app(runtime)) as client:
        made: dict[str, str] = {}
        for asked, over in pairs:
            paragraphs, _ = xquad(folder, over)
            _, questions = xquad(folder, asked)
            if args.questions > 1:
                questions = questions[::args.questions]
            if over not in made:
                started = time.perf_counter()
                made[over] = knowledge_base(client, f"xquad {over}", paragraphs, config)
                say(f"{over}: {len(paragraphs)} paragraphs in {time.perf_counter() - started:.1f} s")
            kb = made[over]
            for mode in args.mode or list(MODES):
                configure(client, kb, {"name": f"xquad {over}", **config, **MODES[mode]})
                results[(asked, over)] = {**results.get((asked, over), {}), mode: score(client, kb, questions)}
                h, m, ms = results[(asked, over)][mode]
                say(f"{asked} over {over}, {mode}: hit@5 {h:.3f}, MRR@10 {m:.3f}, {ms:.1f} ms a question")
    english = results.get(("en", "en"), {})
    print("| questions over paragraphs | mode | hit@5 | MRR@10 | × English hit@5 | ms a question |")
    print("|---|---|---|---|---|---|")
    for (asked, over), modes in results.items():
        for mode, (h, m, ms) in modes.items():
            ratio = f"{h / english[mode][0]:.3f}" if mode in english and english[mode][0] else "–"
            print(f"| {asked} over {over} | {mode} | {h:.3f} | {m:.3f} | {ratio} | {ms:.1f} |")


if __name__ == "__main__":
    main()
