"""Fusing ranked lists: weighted min-max-normalised scores, and reciprocal rank fusion; and the score a fused
result carries (:func:`relevances`): its fused value on the scale of EDDI's relevance, so results are ordered by the
score they show and ``minScore`` keeps a prefix of that order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Ranked = Sequence[tuple[str, float]]  # (id, score), best first
RRF_K = 60  # Cormack et al.'s constant


def _normalised(ranked: Ranked) -> dict[str, float]:
    if not ranked:
        return {}
    scores = [s for _, s in ranked]
    low, high = min(scores), max(scores)
    return {i: (1.0 if high == low else (s - low) / (high - low)) for i, s in ranked}


def weighted(vector: Ranked, keyword: Ranked, vector_weight: float = 0.7, keyword_weight: float = 0.3) -> list[tuple[str, float]]:
    """Each list min-max normalised to [0, 1], then ``w_v * v + w_k * k`` (a missing score is 0)."""
    v, k = _normalised(vector), _normalised(keyword)
    fused = {i: vector_weight * v.get(i, 0.0) + keyword_weight * k.get(i, 0.0) for i in v.keys() | k.keys()}
    return sorted(fused.items(), key=lambda x: (-x[1], x[0]))


def reciprocal_rank(*lists: Ranked, k: int = RRF_K) -> list[tuple[str, float]]:
    """RRF (Cormack et al. 2009): sum over lists of 1 / (k + rank)."""
    fused: dict[str, float] = {}
    for ranked in lists:
        for rank, (i, _) in enumerate(ranked, 1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda x: (-x[1], x[0]))


def best_first(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """(id, score) by score, highest first (ties: id)."""
    return sorted(scores.items(), key=lambda x: (-x[1], x[0]))


def fuse(similarity: Mapping[str, float], bm25: Mapping[str, float], fusion: str, vector_weight: float) -> list[tuple[str, float]]:
    """Every candidate scored on both sides (``similarity``: its cosine, ``bm25``: its keyword score, 0 when it holds
    none of the words), fused to a value in [0, 1], best first (ties: id). ``weighted``: ``w × v + (1 − w) × k``,
    each side min-max normalised over the candidates; ``rrf``: the sum of 1 / (60 + rank) over the sides that
    found it (a side ranks only what it matched), divided by its largest possible value (first on both)."""
    vector, keyword = best_first(similarity), best_first({i: s for i, s in bm25.items() if s > 0})
    if fusion == "rrf":
        best = 2.0 / (RRF_K + 1)
        fused = [(i, f / best) for i, f in reciprocal_rank(vector, keyword)]
    else:
        fused = weighted(vector, keyword, vector_weight, 1.0 - vector_weight)
    seen = {i for i, _ in fused}
    return fused + [(i, 0.0) for i, _ in vector if i not in seen]


def relevances(fused: Sequence[tuple[str, float]], similarities: Sequence[float]) -> list[float]:
    """Fused values (best first) as relevances: ``low + (high − low) × fused / best``, ``best`` the first's fused value,
    ``low`` and ``high`` the least and greatest of the candidates' relevances (cos + 1) / 2. Monotone in ``fused`` (so
    the order is the fused one), on the scale ``minScore`` always had: the first result scores the best relevance any
    candidate has (so minScore keeps it exactly when vector search would keep its first), the others less as they
    rank lower."""
    scores = [(s + 1.0) / 2.0 for s in similarities if s == s]  # (a chunk without its vector: NaN, left out)
    best = fused[0][1] if fused else 0.0
    if not scores or best <= 0:
        return [max(scores, default=f) for _, f in fused]
    low, high = min(scores), max(scores)
    return [low + (high - low) * f / best for _, f in fused]
