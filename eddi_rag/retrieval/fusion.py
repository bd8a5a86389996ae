"""Fusing ranked lists: weighted min-max-normalised scores, and reciprocal rank fusion."""

from __future__ import annotations

from collections.abc import Sequence

Ranked = Sequence[tuple[str, float]]  # (id, score), best first


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


def reciprocal_rank(*lists: Ranked, k: int = 60) -> list[tuple[str, float]]:
    """RRF (Cormack et al. 2009): sum over lists of 1 / (k + rank)."""
    fused: dict[str, float] = {}
    for ranked in lists:
        for rank, (i, _) in enumerate(ranked, 1):
            fused[i] = fused.get(i, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda x: (-x[1], x[0]))
