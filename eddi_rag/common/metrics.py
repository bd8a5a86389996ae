"""Prometheus metrics the library records as it works (served at ``/metrics`` with the API's own):
search latency per store type, the outcome of each LLM turn's retrieval (a RAG miss: knowledge
bases were searched and no passage passed), embedding-cache lookups."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

SEARCH_SECONDS = Histogram(
    "eddi_rag_search_seconds", "One store search (vector or keyword), by store type and kind.", ["store", "kind"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5), registry=REGISTRY)
RAG_TURNS = Counter(
    "eddi_rag_rag_turns", "LLM turns that retrieved, by outcome: context (passages injected), miss (searched, "
    "nothing passed), error.", ["outcome"], registry=REGISTRY)
RAG_MISSES = Counter(
    "eddi_rag_rag_misses", "RAG misses (rag:miss:{taskId}), by reason: no-context (searched, no passage passed), answer "
    "(the model's answer says it found nothing).", ["reason"], registry=REGISTRY)
for _reason in ("no-context", "answer"):
    RAG_MISSES.labels(_reason)  # shown at 0 before the first miss
CACHE_LOOKUPS = Counter(
    "eddi_rag_embedding_cache_lookups", "Embedding-cache lookups of one text each, by result (hit, miss).", ["result"],
    registry=REGISTRY)


def cache_lookups(asked: int, found: int) -> None:
    if found:
        CACHE_LOOKUPS.labels("hit").inc(found)
    if asked > found:
        CACHE_LOOKUPS.labels("miss").inc(asked - found)
