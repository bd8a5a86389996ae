"""eddi-rag eval on a small BEIR-format slice written here (never the benchmark data)."""

import json
import subprocess
import sys

import pytest

from eddi_rag.retrieval.fusion import reciprocal_rank, weighted
from eddi_rag.stores.embedded.bm25 import Bm25Index
from eddi_rag.tools.eval import evaluate, load_beir

DOCS = {
    "d1": ("Night trains", "The night train to Vienna leaves at 22:10 from platform 4."),
    "d2": ("Dining car", "The dining car serves goulash and apple strudel until 21:00."),
    "d3": ("Pets", "Dogs travel free on night trains when kept on a leash."),
    "d4": ("Refunds", "Saver fares are non-refundable; taxes are refunded on request."),
    "d5": ("Baggage", "Business fares include two checked bags of 32 kg each."),
    "d6": ("Zeppelins", "Airships were popular for transatlantic travel in the 1930s."),
}
QUERIES = {"q1": "When does the night train to Vienna leave?", "q2": "Can I bring my dog?", "q3": "How heavy may checked bags be?"}
QRELS = [("q1", "d1", 2), ("q2", "d3", 2), ("q3", "d5", 2), ("q3", "d4", 0)]


@pytest.fixture
def beir(tmp_path):
    (tmp_path / "corpus.jsonl").write_text("\n".join(json.dumps({"_id": i, "title": t, "text": x}) for i, (t, x) in DOCS.items()))
    (tmp_path / "queries.jsonl").write_text("\n".join(json.dumps({"_id": i, "text": t}) for i, t in {**QUERIES, "q9": "unjudged"}.items()))
    (tmp_path / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(f"{q}\t{d}\t{s}" for q, d, s in QRELS))
    return tmp_path


def test_load_beir_keeps_only_judged_queries(beir):
    data = load_beir(beir / "corpus.jsonl", beir / "queries.jsonl", beir / "qrels.tsv")
    assert set(data.queries) == {"q1", "q2", "q3"} and len(data.docs) == 6 and len(data.qrels) == 4
    assert data.docs["d1"].startswith("Night trains\n\n")


def test_every_mode_finds_the_judged_documents(beir, tmp_path):
    data = load_beir(beir / "corpus.jsonl", beir / "queries.jsonl", beir / "qrels.tsv")
    results = evaluate(data, ["vector", "keyword", "hybrid", "rrf"], tmp_path / "cache")
    for mode, scores in results.items():
        assert set(scores) == {"nDCG@10", "R@10", "R@100", "RR@10"}
        assert scores["R@10"] == 1.0, mode  # six documents: every relevant one is in the top 10
        assert 0.5 < scores["nDCG@10"] <= 1.0, mode
    assert results["vector"]["RR@10"] == 1.0  # the model ranks each answer first


def test_bm25_and_fusion():
    index = Bm25Index(list(DOCS), [t + " " + x for t, x in DOCS.values()])
    hits = index.search("trains to Vienna", 3)
    assert hits[0][0] == "d1" and all(s > 0 for _, s in hits)
    assert index.search("the of and", 3) == [] and Bm25Index([], []).search("x", 3) == []
    assert weighted([("a", 0.9), ("b", 0.5)], [("b", 7.0), ("c", 1.0)]) == [("a", 0.7), ("b", 0.3), ("c", 0.0)]
    assert [i for i, _ in reciprocal_rank([("a", 1), ("b", 1)], [("b", 1), ("c", 1)])] == ["b", "a", "c"]


@pytest.mark.integration
def test_eval_command(beir, tmp_path):
    out = subprocess.run([sys.executable, "-m", "eddi_rag.cli", "eval", "--corpus", str(beir / "corpus.jsonl"),
                          "--queries", str(beir / "queries.jsonl"), "--qrels", str(beir / "qrels.tsv"),
                          "--mode", "keyword", "--mode", "hybrid", "--cache-dir", str(tmp_path / "c")],
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "6 documents, 3 judged queries" in out.stdout
    assert "| mode | nDCG@10 | R@10 | R@100 | RR@10 |" in out.stdout and "| hybrid |" in out.stdout


@pytest.mark.parametrize("strategy", ["recursive", "markdown"])
def test_the_pipeline_eval_runs_the_product_end_to_end(beir, tmp_path, strategy):
    from eddi_rag.tools.eval import evaluate_pipeline

    data = load_beir(beir / "corpus.jsonl", beir / "queries.jsonl", beir / "qrels.tsv")
    chunking = {"chunkStrategy": strategy, "chunkSize": 40, "chunkOverlap": 0}
    results = evaluate_pipeline(data, ["vector", "keyword", "hybrid", "rrf"], tmp_path / "c", chunking)
    assert all(scores["R@10"] == 1.0 for scores in results.values()), results
    assert results["vector"]["RR@10"] == 1.0
    again = evaluate_pipeline(data, ["vector"], tmp_path / "c", chunking)  # the KB is kept: nothing re-ingested
    assert again["vector"] == results["vector"]
