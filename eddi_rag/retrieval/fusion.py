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


def _ranks(ranked: Ranked) -> dict[str, int]:
    """Each id's rank in ``ranked`` (best first), equal scores sharing their best rank."""
    ranks: dict[str, int] = {}
    rank, previous = 0, None
    for place, (i, score) in enumerate(ranked, 1):
        if score != previous:
            rank, previous = place, score
        ranks[i] = rank
    return ranks


def reciprocal_rank(*lists: Ranked, k: int = RRF_K) -> list[tuple[str, float]]:
    """RRF (Cormack et al. 2009): sum over lists of 1 / (k + rank); equal scores share their best rank (so which of
    two equals a list names first, by id, never decides their fused order)."""
    fused: dict[str, float] = {}
    for ranked in lists:
        for i, rank in _ranks(ranked).items():
            fused[i] = fused.get(i, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda x: (-x[1], x[0]))


def best_first(scores: Mapping[str, float]) -> list[tuple[str, float]]:
    """(id, score) by score, highest first (ties: id; a NaN, a chunk without its vector, last)."""
    return sorted(scores.items(), key=lambda x: (x[1] != x[1], -x[1] if x[1] == x[1] else 0.0, x[0]))


def fuse(similarity: Mapping[str, float], bm25: Mapping[str, float], fusion: str, vector_weight: float) -> list[tuple[str, float]]:
    """Every candidate scored on both sides (``similarity``: its cosine, ``bm25``: its keyword score, 0 when it holds
    none of the words), fused to a value in [0, 1], best first. ``weighted``: ``w × v + (1 − w) × k``, each side min-max
    normalised over the candidates; with ``w`` 0 (the keyword side orders) a match scores its keyword score over the
    best one's, so the weakest match still ranks above every chunk that matches none; ``rrf``: the sum of 1 / (60 + rank)
    over the sides that found it (a side ranks only what it matched), divided by its largest possible value (first on
    both). Ties are broken by the vector side's rank, then the keyword side's: a side that matches nothing leaves the
    other's order, never the ids'."""
    vector, keyword = best_first(similarity), best_first({i: s for i, s in bm25.items() if s > 0})
    if fusion == "rrf":
        best = 2.0 / (RRF_K + 1)
        fused = dict((i, f / best) for i, f in reciprocal_rank(vector, keyword))
    elif vector_weight <= 0:
        top = keyword[0][1] if keyword else 1.0
        fused = {i: s / top for i, s in keyword}
    else:
        fused = dict(weighted(vector, keyword, vector_weight, 1.0 - vector_weight))
    fused.update({i: 0.0 for i in similarity if i not in fused})
    far = len(fused)
    v_rank, k_rank = _ranks(vector), _ranks(keyword)
    return sorted(fused.items(), key=lambda x: (-x[1], v_rank.get(x[0], far), k_rank.get(x[0], far), x[0]))


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
