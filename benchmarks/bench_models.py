"""The offline models side by side (issue 57, point 3): all-MiniLM-L6-v2 (``local``) against multilingual-e5-small
(``local-multilingual``) on the English sets and on their speed and memory, in one run.

    .venv/bin/python benchmarks/bench_models.py [--docs ../shared/data/claude-docs-qa] [--beir ../shared/data/nfcorpus]
        [--model local --model local-multilingual] [--speed-only]

For each model: claude-docs-qa through REST with every default but the model (hit@5 within 12,000 characters,
bench_docs_qa's metric), NFCorpus through the pipeline (nDCG@10 of the hybrid default, ``eddi-rag eval --pipeline``'s
way), and its speed: 240 XQuAD English paragraphs embedded as ingestion embeds them (passages a second), 200 questions
one at a time (ms a question), and the resident memory the model holds after them (run one ``--model`` a process
for a figure of its own: the first model's libraries are counted with it). XQuAD's languages are
bench_xquad.py's (``--config '{"embeddingProvider": "local-multilingual"}'``). Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_docs_qa import BASE, Bench, question_set  # noqa: E402

from eddi_rag.api.app import create_app  # noqa: E402
from eddi_rag.backends.registry import BUILTIN, EMBEDDINGS, load  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402
from eddi_rag.tools.eval import evaluate_pipeline, load_beir  # noqa: E402

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"


def rss_mb() -> float:
    """The process's resident memory now (Linux), in MB."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024


def speed(provider: str, xquad: Path) -> tuple[float, float, float]:
    """(passages a second, ms a question, MB the model added)."""
    data = json.loads((xquad / "xquad.en.json").read_text(encoding="utf-8"))["data"]
    paragraphs = [p["context"] for a in data for p in a["paragraphs"]]
    questions = [q["question"] for a in data for p in a["paragraphs"] for q in p["qas"]][:200]
    before = rss_mb()
    model = load(EMBEDDINGS, provider).build({})
    model.embed_documents(["warm up"])
    started = time.perf_counter()
    for start in range(0, len(paragraphs), 64):  # (ingestion's batches)
        model.embed_documents(paragraphs[start:start + 64])
    per_second = len(paragraphs) / (time.perf_counter() - started)
    started = time.perf_counter()
    for q in questions:
        model.embed_query(q)
    return per_second, 1000 * (time.perf_counter() - started) / len(questions), rss_mb() - before


def docs_qa(provider: str, data: Path, budget: int, parameters: dict) -> float:
    qa, pages = question_set(data)
    with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as runtime, TestClient(create_app(runtime)) as client:
        r = client.post(BASE, json={"name": data.name, "embeddingProvider": provider, "storeType": "sqlite",
                                    "embeddingParameters": parameters})
        assert r.status_code == 201, r.text
        kb = r.headers["Location"].split("/")[-1].split("?")[0]
        client.post(f"{BASE}/{kb}/ingest", files=[("file", (p.name, p.read_bytes(), "text/markdown")) for p in pages])
        runtime.jobs.wait_idle()
        return Bench(client, qa, budget).score(kb)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", action="append", help="a docs QA set (claude-docs-qa's layout); repeatable; default: "
                        "claude-docs-qa (held_out.py makes another)")
    parser.add_argument("--beir", default=str(SHARED / "nfcorpus"))
    parser.add_argument("--xquad", default=str(SHARED / "xquad"))
    parser.add_argument("--budget", type=int, default=12000)
    parser.add_argument("--model", action="append", choices=sorted(BUILTIN[EMBEDDINGS]))
    parser.add_argument("--speed-only", action="store_true")
    parser.add_argument("--parameters", default="{}", help="embeddingParameters (JSON), e.g. '{\"maxLength\": 256}'")
    parser.add_argument("--no-beir", action="store_true", help="leave NFCorpus out (slow with a slow model)")
    args = parser.parse_args()
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    rows = []
    for provider in args.model or ["local", "local-multilingual"]:
        per_second, query_ms, added = speed(provider, Path(args.xquad))
        say(f"{provider}: {per_second:.1f} passages/s, {query_ms:.1f} ms a question, +{added:.0f} MB")
        hits, ndcg = {}, float("nan")
        if not args.speed_only:
            for docs in args.docs or [str(SHARED / "claude-docs-qa")]:
                hits[Path(docs).name] = docs_qa(provider, Path(docs), args.budget, json.loads(args.parameters))
                say(f"{provider}: {Path(docs).name} hit@5 {hits[Path(docs).name]:.3f}")
        if not args.speed_only and not args.no_beir:
            beir = Path(args.beir)
            data = load_beir(beir / "corpus.jsonl", beir / "queries.jsonl", beir / "qrels" / "test.tsv")
            given = {"embeddingProvider": provider, "embeddingParameters": json.loads(args.parameters)}
            with tempfile.TemporaryDirectory() as tmp:
                ndcg = evaluate_pipeline(data, ["hybrid"], Path(tmp), given, say)["hybrid"]["nDCG@10"]
            say(f"{provider}: NFCorpus nDCG@10 {ndcg:.4f}")
        rows.append((provider, hits, ndcg, per_second, query_ms, added))
    print("| model | docs QA hit@5 | NFCorpus nDCG@10 | passages/s | ms a question | MB |")
    print("|---|---|---:|---:|---:|---:|")
    for provider, hits, ndcg, per_second, query_ms, added in rows:
        said = ", ".join(f"{name} {hit:.3f}" for name, hit in hits.items())
        print(f"| {provider} | {said} | {ndcg:.4f} | {per_second:.1f} | {query_ms:.1f} | {added:.0f} |")


if __name__ == "__main__":
    main()
