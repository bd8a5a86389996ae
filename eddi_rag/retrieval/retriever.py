"""Search one knowledge base: vector, keyword or hybrid, then keep what passes ``minScore``.

A result's ``score`` is what results are ordered by and what ``minScore`` keeps to, so ``minScore`` always keeps a
prefix of the order: in vector mode EDDI's relevance (cos + 1) / 2; in hybrid and keyword mode the fused relevance
(``fusion.relevances``: the fused value on the candidates' relevance scale). Hybrid and keyword searches draw a pool of
candidates whose size does not depend on ``maxResults`` (``POOL``) and score each on both sides (a chunk only one side
found: its cosine from its stored vector, its BM25 from the store's ``keyword_scores``), so the first result is the
same whether one or ten are asked for. Every result also carries its cosine (``similarity``).

Every search is scoped inside the store's own filter (so k results still come back): chunks of
another user (``private``), expired chunks (``expires`` and ``expiresAt`` <= now) and chunks the reader may not
read (``retrieval.access``: the knowledge base's audience, each document's acl) are never candidates. Then
``maxDistance`` and ``minScore`` drop, and (vector mode) among scores within ``recencyWindow`` of each other the
newest chunk (``ingestedAt``) comes first. A chunk switched off on its document's page (``chunk_disabled``) is never a
candidate, nor shown around another's hit.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, cast

from eddi_rag.backends import registry
from eddi_rag.backends.factories import EmbeddingModelFactory, EmbeddingStoreFactory
from eddi_rag.common import metrics
from eddi_rag.config import RagConfiguration
from eddi_rag.ingest import language
from eddi_rag.retrieval.access import EVERYONE, Access, WithheldError
from eddi_rag.retrieval.expansion import Passage, fill, gather
from eddi_rag.retrieval.fusion import best_first, fuse, relevances
from eddi_rag.retrieval.rerankers import Reranker, RerankerFactory
from eddi_rag.stores import filters
from eddi_rag.stores.base import (
    DISABLED,
    KEYWORD_SEARCH,
    LIST_FILTERING,
    KeywordScores,
    KeywordSearch,
    KnowledgeStore,
    RankedIds,
    SearchHit,
    Similarities,
)
from eddi_rag.stores.filters import value_kind

# The threads that run hybrid searches' vector sides (beside their keyword sides, in the searching thread).
_SIDES = ThreadPoolExecutor(max_workers=32, thread_name_prefix="eddi-rag-vector-side")

# Candidates each side of a hybrid (or keyword) search scores, whatever maxResults is, so the first results do not
# depend on how many are asked for (chosen by measuring: benchmarks/README.md, bench_ranking.py).
POOL = 50


def pool_size(k: int) -> int:
    """How many candidates each side of a hybrid or keyword search draws when ``k`` results are asked for."""
    return max(POOL, k)


_ENABLED = filters.parse({DISABLED: {"$ne": True}})  # (parsed once: it is part of every search)


def visible_to(user_id: str | None) -> dict[str, Any]:
    """The chunks a user may see: shared ones and, for a user, that user's private ones."""
    return {"private": {"$ne": True}} if user_id is None else {"$or": [{"private": {"$ne": True}}, {"user_id": user_id}]}


def scope(where: filters.Where, user_id: str | None, now: float, readable: filters.Node | None = None) -> filters.Node:
    """``where`` AND (not private OR this user's) AND (not expiring OR not yet expired) AND ``readable`` (what the
    reader's principals may read: retrieval.access), parsed; the caller's ``where`` on its own, so its errors and
    limits are about what the caller wrote."""
    mine = visible_to(user_id)
    alive = {"$or": [{"expires": {"$ne": True}}, {"expiresAt": {"$gt": now}}]}
    own, shared, current = filters.node(where), filters.parse(mine), filters.parse(alive)
    assert shared is not None and current is not None and _ENABLED is not None  # non-empty filters
    return filters.And((shared, current, _ENABLED, *([readable] if readable else []), *([own] if own else [])))


def _lists_filtered(store: KnowledgeStore, config: RagConfiguration, readable: filters.Node | None) -> None:
    """A store that cannot filter on a document's acl never answers a DOCUMENT_ACL search (nothing is filtered after)."""
    if readable is not None and LIST_FILTERING not in store.capabilities:
        raise WithheldError(f"storeType {config.storeType!r} cannot filter on each chunk's acl here, which audience "
                            f"{config.audience} needs; nothing is read from it")


def newest_first_among_equals(hits: list[SearchHit], window: float) -> list[SearchHit]:
    """Hits whose scores lie within ``window`` of the best score of their run count as equal and
    are ordered newest first (``ingestedAt``); runs keep score order. A hit that moved says why."""
    if window <= 0 or len(hits) < 2:
        return hits
    out: list[SearchHit] = []
    run: list[SearchHit] = []
    tie = {"by": "vector", "tie": f"scores within {window} of each other (recencyWindow) count as equal: the newest comes first"}

    def ordered(run: list[SearchHit]) -> list[SearchHit]:
        newest = sorted(run, key=_age)
        return newest if [h.id for h in newest] == [h.id for h in run] else [replace(h, ranking=tie) for h in newest]

    for hit in hits:
        if run and run[0].score - hit.score > window:
            out += ordered(run)
            run = []
        run.append(hit)
    return out + ordered(run)


def order_rule(config: RagConfiguration) -> str:
    """How a search of ``config`` orders its results, in a sentence (a result's score is the one minScore keeps to)."""
    if config.reranker != "none":
        return (f"By the reranker ({config.reranker}) score, among the candidates minScore kept; a result's score is "
                "the search's, which minScore keeps to.")
    if config.searchMode == "keyword":
        return ("By keyword (BM25) score; a result's score is that order on the relevance scale, which minScore "
                "keeps to.")
    if config.searchMode == "hybrid":
        how = ("reciprocal rank fusion of the vector and keyword ranks" if config.fusion == "rrf" else
               f"{config.vectorWeight:g} × vector + {1 - config.vectorWeight:g} × keyword score, each scaled to 0–1")
        return (f"By score: {how} among {POOL} candidates a side, on the relevance scale (the same whatever "
                "maxResults is); minScore keeps to it.")
    if config.recencyWindow > 0:
        return f"By score; scores within {config.recencyWindow:g} of each other count as equal and the newest comes first."
    return "By score."


def _age(hit: SearchHit) -> float:
    stamp = hit.metadata.get("ingestedAt")
    return -float(stamp) if isinstance(stamp, (int, float)) and value_kind(stamp) == "number" else 0.0


class Hits(list):
    """Search results, best first; ``rerank`` (when a reranker ran) records the order before and after; ``access``:
    what the reader could read (retrieval.access), ``would_withhold``: under aclMode warn, the ids enforcing would drop."""

    rerank: dict[str, Any] | None = None
    access: Access = EVERYONE
    would_withhold: Sequence[str] = ()  # (a list once set: the ids)
    audit: int | None = None  # the audit record's entry of this retrieval (its seq), when one was written


def rerank(reranker: Reranker, query: str, candidates: list[SearchHit], k: int) -> Hits:
    """The ``k`` best candidates by the reranker's score (ties: the search's order); each hit keeps
    its cosine ``score`` (minScore's meaning) and gains ``rerank_score``."""
    scores = reranker.scores(query, [h.text for h in candidates]) if candidates else []
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))[:k]
    kept = Hits(replace(candidates[i], rerank_score=round(scores[i], 6)) for i in order)
    kept.rerank = {"reranker": reranker.name, "before": [h.id for h in candidates], "after": [h.id for h in kept]}
    return kept


class Retriever:
    def __init__(self, embeddings: EmbeddingModelFactory, stores: EmbeddingStoreFactory,
                 rerankers: RerankerFactory | None = None):
        self.embeddings, self.stores = embeddings, stores
        self.rerankers = rerankers or RerankerFactory()

    def search(
        self,
        kb_id: str,
        config: RagConfiguration,
        query: str,
        *,
        k: int | None = None,
        min_score: float | None = None,
        where: dict[str, Any] | None = None,
        user_id: str | None = None,
        vector: list[float] | None = None,
        access: Access = EVERYONE,
    ) -> Hits:
        """``k``, ``min_score``: default the KB's maxResults, minScore. ``vector``: the query's embedding
        when the caller already has it (one per model per turn); then ``query`` may be blank in vector mode.
        ``access``: what the reader may read (retrieval.access), inside the store's filter."""
        if vector is None and (not query or not query.strip()):
            raise ValueError("query must not be empty")
        k = config.maxResults if k is None else k
        threshold = config.minScore if min_score is None else min_score
        store, reads = None, None
        if vector is None and not self.embeddings.built(config):
            # a model not made yet (its session is made in native code, which lets other threads run): the store opened
            # and the question's language read meanwhile; the embedding's error, if any, is the one raised
            embedding = _SIDES.submit(contextvars.copy_context().run, lambda: self.embeddings.for_config(config).embed_query(query))
            try:
                store = self.stores.get(kb_id, config)
                reads = _model_reads(config, query) if config.searchMode == "hybrid" else None
            finally:
                vector = embedding.result()
        elif vector is None:
            vector = self.embeddings.for_config(config).embed_query(query)
        if store is None:
            store = self.stores.get(kb_id, config)
        _lists_filtered(store, config, access.node)
        scoped = scope(where, user_id, time.time(), access.node)  # parsed once, for every store call below
        reranker = self.rerankers.for_config(config)
        fetch = k * config.rerankCandidates if reranker is not None else k
        if config.searchMode == "vector":
            with metrics.SEARCH_SECONDS.labels(config.storeType, "vector").time():
                hits = store.search(vector, fetch, where=scoped)
        else:
            hits = self._with_keywords(store, config, query, vector, fetch, scoped, reads)
        hits = [h for h in hits if h.score >= threshold and (config.maxDistance is None or h.distance <= config.maxDistance)
                and (access.node is None or filters.matches(access.node, h.metadata))]  # (the engine's answer, checked again)
        if reranker is not None:
            found = rerank(reranker, query, hits, k)
        else:
            if config.searchMode == "vector":  # fused orders are not score orders: there, recency has no runs to act on
                hits = newest_first_among_equals(hits, config.recencyWindow)
            found = Hits(hits)
        found.access, found.would_withhold = access, access.counted(kb_id, found)
        return found

    def gather(self, kb_id: str, config: RagConfiguration, hits: list[SearchHit], mode: str | None = None,
               user_id: str | None = None, access: Access = EVERYONE) -> list[Passage]:
        """The passages for ``hits`` before they grow (``expansion.gather``; ``mode``: default the KB's
        contextExpansion); surrounding chunks in the same user/expiry/access scope as the search."""
        store = self.stores.get(kb_id, config)
        _lists_filtered(store, config, access.node)
        return gather(store, hits, mode or config.contextExpansion,
                      neighbors=config.expansionNeighbors, max_chars=config.maxPassageChars,
                      overlap=config.chunkOverlap, where=scope(None, user_id, time.time(), access.node), recheck=access.node)

    def passages(self, kb_id: str, config: RagConfiguration, hits: list[SearchHit], mode: str | None = None,
                 user_id: str | None = None, total_chars: int | None = None, access: Access = EVERYONE) -> list[Passage]:
        """The passages that reach the model for ``hits``, one per document, ordered by their best
        hit, grown within ``total_chars`` when given."""
        return fill(self.gather(kb_id, config, hits, mode, user_id, access), total_chars)

    def _with_keywords(self, store: KnowledgeStore, config: RagConfiguration, query: str, vector: list[float],
                       k: int, where: filters.Node | None, reads: bool | None = None) -> list[SearchHit]:
        """The best ``k`` of a pool of candidates whose size does not depend on ``k`` (``POOL``, or ``k`` when more are
        asked), each scored on both sides: so the first results are the same whatever ``maxResults`` is, and each
        result's score is the fused one it is ordered by (``fusion.relevances``). A store that ranks by ids
        (``RankedIds``) is asked for the text and metadata of the ``k`` kept alone."""
        if KEYWORD_SEARCH not in store.capabilities:
            raise ValueError(f"searchMode {config.searchMode!r} needs keyword search, which storeType {config.storeType!r} lacks")
        pool = pool_size(k)
        lean = isinstance(store, RankedIds)
        rows: dict[str, tuple[str, dict[str, Any]]] = {}  # (text, metadata) of the candidates read so far

        def vector_side() -> dict[str, float]:  # each candidate's cosine, in the vector side's order
            with metrics.SEARCH_SECONDS.labels(config.storeType, "vector").time():
                if lean:
                    return dict(cast(RankedIds, store).nearest(vector, pool, where=where))
                hits = store.search(vector, pool, where=where)
                rows.update((h.id, (h.text, h.metadata)) for h in hits)
                return {h.id: h.similarity for h in hits}

        # a hybrid search's two sides at once: a served store answers the vector side while the keyword side runs
        nearest = _SIDES.submit(vector_side) if config.searchMode == "hybrid" else None
        try:
            with metrics.SEARCH_SECONDS.labels(config.storeType, "keyword").time():
                if lean:
                    keyword = cast(RankedIds, store).keyword_ranked(query, pool, where=where)
                else:
                    keyword_hits = cast(KeywordSearch, store).keyword_search(query, pool, where=where)
                    keyword = [(h.id, h.bm25) for h in keyword_hits]
                    rows.update((h.id, (h.text, h.metadata)) for h in keyword_hits)
        finally:
            similarity = nearest.result() if nearest is not None else {}  # (its error, if any, before the keyword side's)
        bm25 = dict(keyword)
        unscored = [i for i in similarity if i not in bm25]  # the vector side's finds, on the keyword side
        if unscored and isinstance(store, KeywordScores):
            bm25.update({i: s for i, s in store.keyword_scores(query, unscored).items() if i in similarity})
        bm25.update({i: 0.0 for i in unscored if i not in bm25})  # (a store that cannot say: below the pool's least)
        similarity.update(self._similarities(store, vector, [i for i, _ in keyword if i not in similarity]))
        by = "keyword" if config.searchMode == "keyword" else config.fusion
        if by != "keyword" and not (_model_reads(config, query) if reads is None else reads):
            by = UNREAD  # the English model's side would only push out what the keyword side found (Russian: 0.59 against 0.97)
        fusion, weight = (config.fusion, config.vectorWeight) if by == config.fusion else ("weighted", 0.0)
        fused = fuse(similarity, bm25, fusion, weight)[:k]
        unread = [i for i, _ in fused if i not in rows]
        if unread:
            rows.update(cast(RankedIds, store).rows(unread))  # (a chunk deleted since it was ranked: left out)
        ranking = _parts(by, similarity, bm25, dict(fused))
        return [SearchHit(i, *rows[i], similarity[i], ranking=ranking[i], ranked=round(score, 6))
                for (i, _), score in zip(fused, relevances(fused, list(similarity.values()))) if i in rows]

    @staticmethod
    def _similarities(store: KnowledgeStore, vector: list[float], ids: list[str]) -> dict[str, float]:
        """The cosine to the query of each of ``ids`` (the keyword side's finds): computed by the store where it can
        (``Similarities``: no vectors sent), else from their stored vectors; NaN for one without its vector."""
        if not ids:
            return {}
        if isinstance(store, Similarities):
            similarity = store.similarities(vector, ids)
        else:
            from eddi_rag.stores.toolkit import normalise  # (numpy: loaded with the first store, off a start's path)

            q = normalise(vector)[0]
            similarity = {c.id: float(normalise(c.vector)[0] @ q) for c in store.get(ids=ids) if c.vector is not None}
        return {i: similarity.get(i, float("nan")) for i in ids}


UNREAD = "keyword: the model does not read the question's language"  # (a hybrid search ordered by its keyword side)
QUERY_LANGUAGE_SCORE = 0.5  # how sure the language of a question must be before the vector side is set aside (XQuAD:
# 1 English question in 1,190 is then taken for another language, 27 Chinese ones for none)


def _model_reads(config: RagConfiguration, query: str) -> bool:
    """Whether the knowledge base's model reads ``query``'s language: False only when its provider says which languages
    it reads (the English local model) and the question is, surely enough, in another."""
    try:
        reads = registry.load(registry.EMBEDDINGS, config.embeddingProvider or "").languages(config.embeddingParameters)
    except Exception:  # noqa: BLE001 - (no provider, or one that cannot load: the search says so elsewhere)
        return True
    return reads is None or language.detect(query, min_score=QUERY_LANGUAGE_SCORE) in (None, *reads)


def _parts(by: str, similarity: dict[str, float], bm25: dict[str, float],
           fused: dict[str, float]) -> dict[str, dict[str, Any]]:
    """Each result's vector and keyword part among the candidates: its rank and score on each side (keyword None
    where it holds none of the words; vector None in keyword mode), and the fused value that ordered it (``by``:
    the fusion, or what ordered it instead)."""
    v = {i: {"rank": r, "similarity": round(s, 4)} for r, (i, s) in enumerate(best_first(similarity), 1)}
    kw = {i: {"rank": r, "bm25": round(s, 4)} for r, (i, s) in enumerate(best_first({i: s for i, s in bm25.items() if s > 0}), 1)}
    if by == "keyword":
        return {i: {"by": "keyword", "fused": round(f, 6), "keyword": kw.get(i)} for i, f in fused.items()}
    return {i: {"by": by, "fused": round(f, 6), "vector": v.get(i), "keyword": kw.get(i)} for i, f in fused.items()}
