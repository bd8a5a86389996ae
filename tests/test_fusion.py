"""Fusion never buries a match (issue 68, point 3): when the keyword side orders, its weakest match still ranks above
every chunk that matches none; ties go by the other side's rank; a side that matches nothing leaves the other side's
order, never the chunk ids'. The three questions the issue measured, as the shapes their candidates had, then the
properties over any candidates (hypothesis, derandomized in CI)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from eddi_rag.retrieval.fusion import fuse

# (name, weight) of each way a list is fused: weighted hybrid, the keyword side alone (searchMode keyword, or a
# question the model cannot read), reciprocal rank fusion
FUSIONS = [("weighted", 0.8), ("weighted", 0.5), ("weighted", 0.0), ("rrf", 0.8)]


def order(similarity: dict[str, float], bm25: dict[str, float], fusion: str = "weighted", weight: float = 0.0) -> list[str]:
    return [i for i, _ in fuse(similarity, bm25, fusion, weight)]


def test_the_weakest_keyword_match_ranks_above_every_chunk_that_matches_none():
    """"Wie lange darf ich krank zu Hause bleiben …?" over 40 German passages, ordered by the keyword side (the English
    model does not read German): the right passage was vector rank 1 and keyword rank 9 of 9 matches, and came 39th
    (its normalised keyword score 0.0, like the 31 chunks matching nothing, ties by id)."""
    ids = [f"chunk-{n:02d}" for n in range(40)]
    right = "chunk-39"  # the last id: an order by id puts it behind every other zero
    similarity = {i: 0.1 + n / 100 for n, i in enumerate(ids) if i != right} | {right: 0.9}
    bm25 = {i: 9.0 - n for n, i in enumerate(ids[:8])} | {right: 0.4}
    ranked = order(similarity, bm25)
    assert ranked.index(right) == 8  # behind the eight stronger matches, ahead of all 31 that match nothing
    assert ranked[9:] == sorted((i for i in ids if i not in bm25), key=lambda i: -similarity[i])  # then by vector


def test_a_keyword_rank_two_of_two_stays_second():
    """"¿Por qué ha desaparecido lo que mandé a la impresora ayer?": keyword rank 2 (of 2 matches), vector rank 1, was
    10th."""
    ids = [f"c{n}" for n in range(12)]
    similarity = {i: 0.2 for i in ids} | {"c11": 0.7}
    assert order(similarity, {"c3": 5.0, "c11": 1.2})[:2] == ["c3", "c11"]


def test_a_side_that_matches_nothing_leaves_the_vector_order():
    """A German question over English passages shares no word with them: its five results were fused 0.0 in id order,
    vector ranks 38, 17, 16, 30, 6. Now they are the vector side's first five, whatever the fusion."""
    similarity = {f"id-{n:02d}": ((n * 37) % 40) / 40 for n in range(40)}
    by_vector = sorted(similarity, key=lambda i: -similarity[i])
    for fusion, weight in FUSIONS:
        assert order(similarity, {i: 0.0 for i in similarity}, fusion, weight)[:5] == by_vector[:5], fusion


def test_equal_fused_values_go_by_the_vector_rank_then_the_keyword_rank():
    similarity = {"a": 0.1, "b": 0.9, "c": 0.5}
    assert order(similarity, {"a": 2.0, "b": 2.0, "c": 2.0}) == ["b", "c", "a"]  # one keyword score: vector decides
    assert order({"x": 0.5, "y": 0.5}, {"x": 1.0, "y": 3.0}, "weighted", 0.8) == ["y", "x"]  # one cosine: keyword decides


def test_a_chunk_without_its_vector_comes_after_those_with_one():
    assert order({"a": float("nan"), "b": 0.2, "c": 0.3}, {}) == ["c", "b", "a"]


# --- the properties, over any candidates ----------------------------------------------------------

candidates = st.dictionaries(st.sampled_from([f"c{n}" for n in range(30)]),
                             st.tuples(st.floats(-1, 1), st.one_of(st.just(0.0), st.floats(0.01, 30))), min_size=1)


def _sides(drawn: dict[str, tuple[float, float]]) -> tuple[dict[str, float], dict[str, float]]:
    return {i: v for i, (v, _) in drawn.items()}, {i: k for i, (_, k) in drawn.items()}


@given(candidates)
def test_every_candidate_comes_back_once_with_a_fused_value_in_0_1(drawn):
    similarity, bm25 = _sides(drawn)
    for fusion, weight in FUSIONS:
        fused = fuse(similarity, bm25, fusion, weight)
        assert sorted(i for i, _ in fused) == sorted(similarity), fusion
        assert all(-1e-9 <= f <= 1 + 1e-9 for _, f in fused), fusion
        assert [f for _, f in fused] == sorted((f for _, f in fused), reverse=True), fusion


@given(candidates)
def test_with_the_keyword_side_ordering_every_match_ranks_above_every_chunk_that_matches_none(drawn):
    similarity, bm25 = _sides(drawn)
    ranked = order(similarity, bm25)
    matches = [i for i in ranked if bm25[i] > 0]
    assert ranked[:len(matches)] == matches
    assert ranked[len(matches):] == sorted((i for i in similarity if bm25[i] == 0), key=lambda i: (-similarity[i], i))


@given(candidates)
def test_a_chunk_at_least_as_good_on_both_sides_never_ranks_below_another(drawn):
    """No match is buried under what it beats: if ``a``'s cosine and keyword score are each at least ``b``'s, ``a`` comes
    first, whatever the fusion (a keyword match over a chunk with no match and the same cosine, in particular)."""
    similarity, bm25 = _sides(drawn)
    for fusion, weight in FUSIONS:
        position = {i: p for p, i in enumerate(order(similarity, bm25, fusion, weight))}
        for a in similarity:
            for b in similarity:
                if a != b and similarity[a] >= similarity[b] and bm25[a] >= bm25[b] and (similarity[a], bm25[a]) != (similarity[b], bm25[b]):
                    assert position[a] < position[b], (fusion, weight, a, b, drawn)


@given(st.dictionaries(st.sampled_from([f"c{n}" for n in range(30)]), st.floats(-1, 1), min_size=1))
def test_when_no_chunk_holds_a_word_of_the_question_every_fusion_keeps_the_vector_order(similarity):
    by_vector = sorted(similarity, key=lambda i: (-similarity[i], i))
    for fusion, weight in FUSIONS:
        assert order(similarity, dict.fromkeys(similarity, 0.0), fusion, weight) == by_vector, fusion
