"""The KnowledgeStore conformance suite, as mixins a store package subclasses (after Haystack's
``haystack/testing/document_store.py``).

Every backend in eddi-rag passes it; a third-party backend joins the same way::

    from eddi_rag.testing import StoreConformance

    class TestMyStore(StoreConformance):
        @pytest.fixture
        def make(self, tmp_path):
            made = []
            def build(kb):  # a store of the backend for knowledge base ``kb``, unique to this test
                store = MyStore(f"test-{uuid.uuid4().hex[:8]}-{kb}", {...}, StoreContext(Database(tmp_path / "s.db"), tmp_path))
                made.append(store)
                return store
            yield build
            for store in made:
                store.drop()

or picks single mixins (WriteTests, SearchTests, FilterTests, IsolationTests, KeywordTests,
PagingTests). The reference for filters is the Python evaluator in eddi_rag.stores.filters: every
backend must return exactly what it returns. Needs pytest and hypothesis (``eddi-rag[testing]``).
"""

from __future__ import annotations

import random
import weakref

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eddi_rag.stores import filters
from eddi_rag.stores.base import (
    LIST_FILTERING,
    Chunk,
    DimensionMismatchError,
    KeywordScores,
    KnowledgeStore,
    RankedIds,
    Similarities,
)

DIM = 24  # past 16, so SIMD loops and their scalar tails both run
PAGING_CHUNKS = 2_100  # over two of the engines' largest pages (Chroma 1,000, Elasticsearch 1,000; Typesense 250...)


def vec(*xs: float) -> list[float]:
    return list(xs) + [0.0] * (DIM - len(xs))


def rand_chunks(n: int, seed: int = 0, prefix: str = "c") -> list[Chunk]:
    rng = np.random.default_rng(seed)
    colours = ["red", "green", "blue"]
    out = []
    for i in range(n):
        meta: dict = {"source": f"doc{i % 4}.md", "n": i, "colour": colours[i % 3], "even": i % 2 == 0, "w": i / 4}
        if i % 5 == 0:
            del meta["colour"]  # missing fields are part of the contract
        out.append(Chunk(f"{prefix}{i:03d}", f"text {i}", meta, rng.standard_normal(DIM).tolist()))
    return out


def ids(items) -> list[str]:
    return [x.id for x in items]


FILTERS = [
    {"colour": "red"},
    {"colour": {"$eq": "red"}},
    {"colour": {"$ne": "red"}},  # includes chunks with no colour
    {"n": {"$gt": 10}},
    {"n": {"$gte": 10, "$lt": 15}},
    {"w": {"$lte": 1.5}},
    {"w": {"$gt": 2}},
    {"n": {"$in": [1, 2, 3, 40]}},
    {"colour": {"$nin": ["red", "blue"]}},
    {"colour": {"$in": []}},
    {"even": True},
    {"even": {"$ne": False}},
    {"source": "doc1.md", "even": False},
    {"$or": [{"colour": "blue"}, {"n": {"$lt": 3}}]},
    {"$and": [{"n": {"$gte": 5}}, {"$or": [{"colour": "green"}, {"colour": {"$nin": ["green", "blue", "red"]}}]}]},
    {"missing": {"$ne": 1}},
    {"missing": 1},
    {"n": "3"},  # types never coerce: "3" is not 3
    {"source": {"$gt": "doc2.md"}},
    {"n": 1.0},
    {"even": 1},  # a boolean is not a number
    # $in / $nin over booleans and over missing fields (hypothesis found Typesense's $nin [false, true])
    {"even": {"$nin": [False, True]}},
    {"even": {"$in": [False, True]}},
    {"even": {"$nin": [True]}},
    {"missing": {"$nin": [True, False]}},
    {"missing": {"$in": [True, "x", 1]}},
    {"colour": {"$nin": ["red", True, 3]}},
    {"colour": "RED"},  # strings compare with their case (Typesense's own filter does not)
    {"colour": {"$ne": "RED"}},
    {"colour": {"$nin": ["Red", "blue"]}},
    # a string compared with a field that holds booleans (EDDI's langchain4j layout stores them as "true"/"false")
    {"even": {"$gt": "doc1.md"}},
    {"even": {"$lt": "zzz"}},
    {"even": "true"},
    {"even": {"$in": ["true", "x", 3]}},
    {"even": {"$ne": "true"}},
    {"even": {"$nin": ["false", "true"]}},
]


# What a user may type that query parsers read as syntax, scripts without spaces, and long or odd strings: each must be
# searched as words (ids found, or none), never raise. (Lone surrogates are refused before a store is asked.)
ODD_QUERIES = ["-x", "+", ":", '"', "^", "~", "*", "?", "[", "]", "(", ")", "{", "}", "\\", "/", "!", "&&", "||",
               "AND OR NOT", "NOT train", "a:b", "title:train", "train^2", "train~", "*train", '"unclosed train', "(train",
               "作为卡罗莱纳黑豹队的先发球员，谁在九场比赛中拿下了五次擒杀？", "火车" * 50, "🙂 train", "\u200b", " ", "\n\t",
               "x" * 2000, "Zürich–Wien ✓", "ق" * 30, "-" * 100]

_FIELDS = ["n", "w", "colour", "source", "even", "missing"]


_scalars = st.one_of(st.integers(-2, 25), st.sampled_from([0.5, 1.25, 3.0]), st.sampled_from(["red", "blue", "doc1.md", "doc3.md", "zzz"]), st.booleans())


_ordered = st.one_of(st.integers(-2, 25), st.sampled_from([0.5, 1.25, 3.0]), st.sampled_from(["doc1.md", "green", "m"]))


def _leaf() -> st.SearchStrategy:
    field = st.sampled_from(_FIELDS)
    return st.one_of(
        st.builds(lambda f, v: {f: v}, field, _scalars),
        st.builds(lambda f, op, v: {f: {op: v}}, field, st.sampled_from(["$eq", "$ne"]), _scalars),
        st.builds(lambda f, op, v: {f: {op: v}}, field, st.sampled_from(["$gt", "$gte", "$lt", "$lte"]), _ordered),
        st.builds(lambda f, op, v: {f: {op: v}}, field, st.sampled_from(["$in", "$nin"]), st.lists(_scalars, max_size=3)),
    )


_where = st.recursive(_leaf(), lambda inner: st.builds(lambda op, xs: {op: xs}, st.sampled_from(["$and", "$or"]),
                                                       st.lists(inner, min_size=1, max_size=3)), max_leaves=6)



# Lists of strings (a document's acl): principals, deny entries, and strings an engine's query syntax must escape
PRINCIPALS = ["user:alice", "user:bob", "group:finance", "group:hr", "public", "link:organization", "email:a@example.org",
              "deny:user:bob", "deny:group:hr", "group:o'brien, \"q\"", "group:a`b]&&x", "group:Finance"]


def acl_chunks(n: int = 30, seed: int = 5) -> list[Chunk]:
    """Chunks whose ``acl`` is a list of PRINCIPALS (some none, some empty, one a scalar string, one mixing types)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        meta: dict = {"source": f"doc{i % 3}.md", "n": i}
        if i % 7 == 1:
            meta["acl"] = []
        elif i % 7 == 2:
            meta["acl"] = "group:finance"  # a string, not a list: holds nothing
        elif i % 7 == 3:
            meta["acl"] = [1, True, "group:hr"]
        elif i % 7 != 0:
            meta["acl"] = rng.sample(PRINCIPALS, rng.randint(1, 4))
        out.append(Chunk(f"a{i:03d}", f"text {i}", meta, np.random.default_rng(i).standard_normal(DIM).tolist()))
    return out


ACL_FILTERS = [
    {"acl": {"$containsAny": ["group:finance"]}},
    {"acl": {"$containsAny": ["user:alice", "group:finance", "public"]}},
    {"acl": {"$containsAny": []}},
    {"acl": {"$containsNone": ["deny:user:bob", "deny:group:hr"]}},
    {"acl": {"$containsNone": []}},
    {"acl": {"$containsNone": ["group:finance"]}},  # "group:Finance" is another group
    {"acl": {"$containsAny": ["group:o'brien, \"q\"", "group:a`b]&&x"]}},
    {"acl": {"$containsAny": ["group:finance"]}, "n": {"$gt": 10}},
    {"$and": [{"acl": {"$containsAny": ["user:bob", "group:hr", "public"]}},
              {"acl": {"$containsNone": ["deny:user:bob", "deny:group:hr"]}}]},
    {"$or": [{"acl": {"$containsAny": ["group:hr"]}}, {"source": "doc1.md"}]},
    {"missing": {"$containsAny": ["x"]}},
    {"missing": {"$containsNone": ["x"]}},
    {"n": {"$containsAny": ["3"]}},
    {"acl": "group:finance"},  # the scalar operators see a list as no scalar
    {"acl": {"$ne": "group:finance"}},
    {"acl": {"$in": ["group:hr", "public"]}},
    {"acl": {"$nin": ["group:hr"]}},
]


def _acl_leaf() -> st.SearchStrategy:
    principals = st.lists(st.sampled_from(PRINCIPALS), max_size=4)
    return st.one_of(
        st.builds(lambda f, op, v: {f: {op: v}}, st.sampled_from(["acl", "acl", "n", "missing"]),
                  st.sampled_from(["$containsAny", "$containsNone"]), principals),
        st.builds(lambda f, v: {f: v}, st.sampled_from(["acl", "source"]), st.sampled_from(["group:finance", "doc1.md"])),
        st.builds(lambda v: {"n": {"$lt": v}}, st.integers(0, 30)),
    )


_acl_where = st.recursive(_acl_leaf(), lambda inner: st.builds(lambda op, xs: {op: xs}, st.sampled_from(["$and", "$or"]),
                                                               st.lists(inner, min_size=1, max_size=3)), max_leaves=5)


# The property test's store, made once per test for all of hypothesis' examples (a store may hold a
# connection: sixty of them at once would be sixty connections).
_ONE_PER_TEST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _Fixtures:
    """A subclass provides ``make`` (see the module's docstring); ``store`` is ``make("kb-1")``."""

    @pytest.fixture
    def store(self, make) -> KnowledgeStore:
        return make("kb-1")


class WriteTests(_Fixtures):
    """Writing, reading back, deleting; atomic replace; dimension checks; health."""

    def test_implements_the_protocol(self, store):
        assert isinstance(store, KnowledgeStore)
        assert "metadata_filtering" in store.capabilities

    def test_upsert_count_get_with_limit_offset(self, store):
        store.upsert(rand_chunks(10))
        assert store.count() == 10
        assert ids(store.get()) == [f"c{i:03d}" for i in range(10)]
        assert ids(store.get(limit=3, offset=4)) == ["c004", "c005", "c006"]
        assert ids(store.get(ids=["c007", "c002", "nope"])) == ["c002", "c007"]
        assert ids(store.get(where={"even": True}, ids=["c007", "c002"])) == ["c002"]
        assert store.get(ids=[]) == []
        got = store.get(where={"n": 3})[0]
        assert (got.text, got.metadata["source"]) == ("text 3", "doc3.md")
        assert len(got.vector) == DIM

    def test_upsert_replaces_by_id(self, store):
        store.upsert([Chunk("a", "old", {"v": 1}, vec(1))])
        store.upsert([Chunk("a", "new", {"v": 2}, vec(0, 1)), Chunk("b", "b", {}, vec(1))])
        assert store.count() == 2
        a = store.get(where={"v": 2})
        assert ids(a) == ["a"] and a[0].text == "new"
        assert store.search(vec(0, 1), 1)[0].id == "a"

    def test_a_chunk_written_again_keeps_none_of_its_old_fields(self, store):
        """A chunk written again without a field (its readers' list emptied, a key gone) no longer matches a filter
        on it: Chroma's upsert merges a row's metadata with what it held."""
        store.upsert([Chunk("a", "old", {"v": 1, "acl": ["group:hr"]}, vec(1))])
        store.upsert([Chunk("a", "new", {"w": 2}, vec(1))])
        assert store.get(where={"v": 1}) == [] and ids(store.get(where={"w": 2})) == ["a"]
        assert store.get(ids=["a"])[0].metadata.get("acl") is None
        if LIST_FILTERING in store.capabilities:
            assert store.get(where={"acl": {"$containsAny": ["group:hr"]}}) == []

    def test_structured_metadata_comes_back_as_it_was_written(self, store):
        """Metadata beyond scalars (a chunk's ``boxes`` on its page, a list of tags, a nested object) is returned
        by get and search as it was written, and its scalar fields still filter."""
        meta = {"source": "scan.pdf", "page": 2, "boxes": [[0.1381, 0.2118, 0.8181, 0.2884], [0.14, 0.3, 0.5, 0.31]],
                "tags": ["a", "b"], "mail": {"subject": "Report", "to": ["x@example.com"]}, "sentAt": "2026-11-24T10:00:00+01:00"}
        store.upsert([Chunk("s", "structured", meta, vec(1)), Chunk("t", "other", {"source": "other.pdf", "page": 3}, vec(0, 1))])
        as_written = lambda m: {k: m.get(k) for k in meta}  # noqa: E731 - (a layout may add keys: EDDI's adds document_id)
        assert as_written(store.get(ids=["s"])[0].metadata) == meta
        assert as_written(store.search(vec(1), 1)[0].metadata) == meta
        assert ids(store.get(where={"page": 2})) == ["s"]

    def test_delete_by_ids_and_by_where(self, store):
        store.upsert(rand_chunks(10))
        assert store.delete(ids=["c001", "c002", "nope"]) == 2
        assert store.delete(where={"source": "doc0.md"}) == 3  # c000, c004, c008
        assert store.delete() == 0  # nothing named: nothing deleted
        assert ids(store.get()) == ["c003", "c005", "c006", "c007", "c009"]

    def test_replace_is_atomic(self, store):
        store.upsert([Chunk("old1", "o", {"source": "a"}, vec(1)), Chunk("keep", "k", {"source": "b"}, vec(1))])
        bad = [Chunk("new1", "n", {"source": "a"}, vec(1)), Chunk("new2", "n", {"source": "a"}, [1.0] * (DIM + 1))]
        with pytest.raises(Exception):  # noqa: B017 - each engine refuses in its own words
            store.replace({"source": "a"}, bad)
        assert ids(store.get()) == ["keep", "old1"]
        store.replace({"source": "a"}, [Chunk("new1", "n", {"source": "a"}, vec(1))])
        assert ids(store.get()) == ["keep", "new1"]

    def test_dimension_mismatch_is_a_clear_error(self, store):
        store.upsert([Chunk("a", "", {}, vec(1))])
        with pytest.raises(DimensionMismatchError, match=f"{DIM}-dimensional"):
            store.upsert([Chunk("b", "", {}, [1.0, 0.0])])
        with pytest.raises(DimensionMismatchError):
            store.search([1.0, 0.0], 1)

    def test_empty_store(self, store):
        assert store.search(vec(1), 3) == [] and store.get() == [] and store.count() == 0
        assert store.health()["status"] == "ok"

    def test_health_reports_documents(self, store):
        store.upsert(rand_chunks(3))
        h = store.health()
        assert h["status"] == "ok" and h["details"]["documents"] == 3


class SearchTests(_Fixtures):
    """Vector search: order, EDDI's scores, real embedding sizes, ties by id, filtered."""

    def test_search_orders_by_score_and_reports_eddi_scores(self, store):
        store.upsert([
            Chunk("same", "", {}, vec(1, 0)),
            Chunk("near", "", {}, vec(1, 1)),
            Chunk("orth", "", {}, vec(0, 1)),
            Chunk("opp", "", {}, vec(-1, 0)),
        ])
        hits = store.search(vec(2, 0), 4)  # query need not be normalised
        assert ids(hits) == ["same", "near", "orth", "opp"]
        same, near, orth, opp = hits
        assert same.similarity == pytest.approx(1, abs=1e-6) and same.score == pytest.approx(1, abs=1e-6)
        assert near.similarity == pytest.approx(2 ** -0.5, abs=1e-6)
        assert orth.score == pytest.approx(0.5, abs=1e-6) and orth.distance == pytest.approx(1, abs=1e-6)
        assert opp.score == pytest.approx(0, abs=1e-6) and opp.distance == pytest.approx(2, abs=1e-6)
        assert ids(store.search(vec(1), 2)) == ["same", "near"]

    @pytest.mark.parametrize("dim", [384, 1536])
    def test_real_embedding_sizes(self, make, dim):
        """384-d (the local model) and 1536-d (OpenAI's default): long vectors must fit every request."""
        store = make(f"kb-{dim}")
        vectors = np.random.default_rng(3).standard_normal((5, dim))
        store.upsert([Chunk(f"r{i}", f"t{i}", {"i": i}, vectors[i].tolist()) for i in range(5)])
        assert [h.id for h in store.search(vectors[3].tolist(), 2, where={"i": {"$gte": 0}})][0] == "r3"
        assert len(store.get(ids=["r1"])[0].vector) == dim

    def test_ties_are_broken_by_chunk_id(self, store):
        store.upsert([Chunk(i, "", {}, vec(1)) for i in ["d", "b", "c", "a"]])
        assert ids(store.search(vec(1), 3)) == ["a", "b", "c"]

    def test_search_with_a_filter(self, store):
        chunks = rand_chunks(30)
        store.upsert(chunks)
        q = chunks[7].vector
        hits = store.search(q, 5, where={"colour": "green"})
        assert hits and all(h.metadata.get("colour") == "green" for h in hits)
        assert hits[0].id == "c007"
        assert store.search(q, 5, where={"colour": "purple"}) == []


class FilterTests(_Fixtures):
    """The one filter language, answered exactly as the reference evaluator answers it."""

    @pytest.mark.parametrize("where", FILTERS, ids=[str(f) for f in FILTERS])
    def test_every_filter_matches_the_reference_evaluator(self, store, where):
        chunks = rand_chunks(20)
        store.upsert(chunks)
        node = filters.parse(where)
        expected = sorted(c.id for c in chunks if filters.matches(node, c.metadata))
        assert ids(store.get(where=where)) == expected
        assert store.count(where) == len(expected)
        assert sorted(ids(store.search(chunks[0].vector, 100, where=where))) == expected

    def test_filters_at_the_documented_limits(self, store):
        """filters.MAX_VALUES values in one $in, filters.MAX_DEPTH levels of $and/$or, inside the
        scope filter retrieval wraps every caller's filter in and the And expansion adds."""
        from eddi_rag.retrieval.retriever import scope

        chunks = rand_chunks(20)
        store.upsert(chunks)
        wanted = [*range(0, 2 * filters.MAX_VALUES, 2)][: filters.MAX_VALUES - 2] + ["red", True]  # the evens, any type
        where: dict = {"n": {"$in": wanted}}
        for level in range(filters.MAX_DEPTH):
            where = {"$or": [where, {"missing": 1}]} if level % 2 == 0 else {"$and": [where, {"n": {"$gte": 0}}]}
        tree = filters.And((filters.parse({"source": {"$ne": "none"}}), scope(where, None, 0.0)))
        expected = sorted(c.id for c in chunks if filters.matches(tree, c.metadata))
        assert expected and ids(store.get(where=tree)) == expected
        assert sorted(ids(store.search(chunks[0].vector, 100, where=tree))) == expected

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(where=_where)
    def test_random_filters_match_the_reference(self, make, where):
        store = _ONE_PER_TEST.get(make) or _ONE_PER_TEST.setdefault(make, make("kb-property"))  # one store, every example
        if store.count() == 0:
            store.upsert(rand_chunks(20))
        chunks = rand_chunks(20)
        node = filters.parse(where)
        expected = sorted(c.id for c in chunks if filters.matches(node, c.metadata))
        assert ids(store.get(where=where)) == expected, where

    @pytest.mark.parametrize("where", ACL_FILTERS, ids=[str(f) for f in ACL_FILTERS])
    def test_list_filters_match_the_reference_evaluator(self, store, where):
        """``$containsAny`` / ``$containsNone`` over a list field, answered in the engine's own query; a store
        that cannot (EDDI's layouts keep scalars only) refuses them, naming the operator."""
        chunks = acl_chunks()
        if LIST_FILTERING not in store.capabilities:
            store.upsert([Chunk("a", "text", {"source": "doc1.md"}, vec(1))])
            with pytest.raises(ValueError, match="containsAny|containsNone"):
                store.get(where={"acl": {"$containsAny": ["group:finance"]}})
            return
        store.upsert(chunks)
        node = filters.parse(where)
        expected = sorted(c.id for c in chunks if filters.matches(node, c.metadata))
        assert ids(store.get(where=where)) == expected
        assert store.count(where) == len(expected)
        assert sorted(ids(store.search(chunks[0].vector, 100, where=where))) == expected
        if "keyword_search" in store.capabilities:
            assert sorted(h.id for h in store.keyword_search("text", 100, where=where)) == expected

    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(where=_acl_where)
    def test_random_list_filters_match_the_reference(self, make, where):
        store = _ONE_PER_TEST.get(make) or _ONE_PER_TEST.setdefault(make, make("kb-acl-property"))
        if LIST_FILTERING not in store.capabilities:
            return  # (the refusal is the test above's)
        if store.count() == 0:
            store.upsert(acl_chunks())
        node = filters.parse(where)
        expected = sorted(c.id for c in acl_chunks() if filters.matches(node, c.metadata))
        assert ids(store.get(where=where)) == expected, where

    def test_user_scoping_and_expiry_hold_in_the_engine(self, store):
        """The retriever's scope filter (a user sees shared chunks and their own private ones, never
        another user's; expired chunks never) is answered exactly, inside each engine."""
        from eddi_rag.retrieval.retriever import scope

        now = 1_800_000_000.0
        rows = {
            "shared": {},
            "alice": {"user_id": "alice", "private": True},
            "bob": {"user_id": "bob", "private": True},
            "bob-shared-looking": {"user_id": "bob", "private": True, "source": "handbook.md"},
            "expired": {"expires": True, "expiresAt": now - 1},
            "alive": {"expires": True, "expiresAt": now + 60},
            "alice-expired": {"user_id": "alice", "private": True, "expires": True, "expiresAt": now - 60},
        }
        store.upsert([Chunk(id, f"the locker code of {id}", {"source": "notes.md", **meta}, vec(1, i / 10))
                      for i, (id, meta) in enumerate(rows.items())])
        seen = {
            user: sorted(h.id for h in store.search(vec(1), 10, where=scope(None, user, now)))
            for user in ("alice", "bob", "carol", None)
        }
        assert seen["alice"] == ["alice", "alive", "shared"]
        assert seen["bob"] == ["alive", "bob", "bob-shared-looking", "shared"]
        assert seen["carol"] == seen[None] == ["alive", "shared"]
        narrowed = store.search(vec(1), 10, where=scope({"source": "handbook.md"}, "alice", now))
        assert narrowed == []  # asking for bob's document by name does not reach it
        if "keyword_search" in store.capabilities:
            assert sorted(h.id for h in store.keyword_search("locker code", 10, where=scope(None, "alice", now))) == seen["alice"]


class IsolationTests(_Fixtures):
    """Knowledge bases apart; store objects hold no data of their own."""

    def test_knowledge_bases_are_isolated(self, make):
        a, b = make("kb-a"), make("kb-b")
        a.upsert([Chunk("x", "in a", {}, vec(1))])
        assert b.count() == 0 and b.search(vec(1), 5) == []
        b.drop()
        assert a.count() == 1
        a.drop()
        assert a.count() == 0

    def test_a_dropped_knowledge_base_leaves_nothing_in_one_made_after_it(self, make):
        """Chroma 1.5.9's server handed a deleted collection's list-valued metadata to rows of a collection made
        afterwards (an ``acl`` on another knowledge base's chunk)."""
        gone = make("kb-gone")
        gone.upsert([Chunk(f"g{i}", "gone", {"acl": ["group:hr"], "tags": ["x"]}, vec(1)) for i in range(3)])
        gone.drop()
        after = make("kb-after")
        after.upsert([Chunk(f"n{i}", "new", {"v": i}, vec(1)) for i in range(3)])
        assert all(set(c.metadata) <= {"v", "document_id"} for c in after.get())  # (EDDI's layout adds document_id)
        if LIST_FILTERING in after.capabilities:
            assert after.get(where={"acl": {"$containsAny": ["group:hr"]}}) == []
        after.drop()

    def test_a_new_store_object_sees_the_same_data(self, make):
        """What a factory eviction does: drop the object, build another for the same KB."""
        first = make("kb-e")
        first.upsert(rand_chunks(5))
        first.search(vec(1), 1)  # warm any cache
        second = make("kb-e")
        second.upsert([Chunk("zzz", "late", {}, vec(1))])
        assert first.count() == second.count() == 6
        assert first.search(vec(1), 1)[0].id == "zzz"


class KeywordTests(_Fixtures):
    """Keyword search, for backends declaring it."""

    def test_keyword_search_when_declared(self, store):
        if "keyword_search" not in store.capabilities:
            pytest.skip(f"{type(store).__name__} declares no keyword_search")
        texts = ["the night train to Vienna", "goulash in the dining car", "a train timetable for Vienna and Graz", "apple strudel"]
        store.upsert([Chunk(f"k{i}", t, {"i": i}, vec(1, i)) for i, t in enumerate(texts)])
        hits = store.keyword_search("Vienna train", 3)
        assert {h.id for h in hits} == {"k0", "k2"} and all(h.bm25 > 0 for h in hits)
        assert [h.id for h in store.keyword_search("Vienna", 3, where={"i": {"$gt": 0}})] == ["k2"]
        assert store.keyword_search("zeppelin", 3) == []

    def test_any_string_is_a_keyword_query(self, store):
        """Query syntax, scripts without spaces and long strings are words to look for, never an error (issue 56/57:
        a Chinese question made tantivy raise "Only excluding terms given")."""
        if "keyword_search" not in store.capabilities:
            pytest.skip(f"{type(store).__name__} declares no keyword_search")
        store.upsert([Chunk("k0", "the night train to Vienna; 火车十点出发", {"i": 0}, vec(1))])
        for text in ODD_QUERIES:
            hits = store.keyword_search(text, 3)
            assert all(h.id == "k0" for h in hits), text
            if isinstance(store, KeywordScores):
                store.keyword_scores(text, ["k0"])

    def test_keyword_scores_are_the_keyword_search_scores(self, store):
        """A backend scoring given chunks (KeywordScores, what a hybrid search asks of the vector side's finds) gives
        each the score its keyword search gives it, and none to a chunk without the words."""
        if not isinstance(store, KeywordScores):
            pytest.skip(f"{type(store).__name__} scores no given chunks")
        texts = ["the night train to Vienna", "goulash in the dining car", "a train timetable for Vienna and Graz", "apple strudel"]
        store.upsert([Chunk(f"k{i}", t, {"i": i}, vec(1, i)) for i, t in enumerate(texts)])
        searched = {h.id: h.bm25 for h in store.keyword_search("Vienna train", 4)}
        scored = store.keyword_scores("Vienna train", ["k0", "k1", "k2", "k3"])
        assert scored == pytest.approx(searched) and set(scored) == {"k0", "k2"}
        assert store.keyword_scores("Vienna train", ["k2"]) == pytest.approx({"k2": searched["k2"]})

    def test_similarities_are_the_search_s_cosines(self, store):
        """A backend computing given chunks' cosine to a vector (Similarities, what a hybrid search asks of the
        keyword side's finds) gives each the similarity its vector search gives it; an unknown id none."""
        if not isinstance(store, Similarities):
            pytest.skip(f"{type(store).__name__} computes no similarities")
        assert store.similarities(vec(1), ["s0"]) == {}
        store.upsert([Chunk(f"s{i}", f"text {i}", {"i": i}, vec(1, i)) for i in range(4)])
        searched = {h.id: h.similarity for h in store.search(vec(1, 2), 4)}
        assert store.similarities(vec(1, 2), ["s0", "s3", "nope"]) == pytest.approx({i: searched[i] for i in ("s0", "s3")},
                                                                                    abs=1e-5)
        assert store.similarities(vec(1, 2), []) == {}

    def test_ranked_ids_are_the_searches_without_their_rows(self, store):
        """A backend ranking by ids (RankedIds, what a hybrid search asks so it reads the rows of the results it keeps
        alone) ranks as its searches do, with their scores, and reads the rows of the ids asked that exist."""
        if not isinstance(store, RankedIds):
            pytest.skip(f"{type(store).__name__} ranks no ids apart")
        texts = ["the night train to Vienna", "goulash in the dining car", "a train timetable for Vienna and Graz", "apple strudel"]
        store.upsert([Chunk(f"r{i}", t, {"i": i}, vec(1, i)) for i, t in enumerate(texts)])
        where = {"i": {"$lt": 3}}
        searched = store.search(vec(1, 2), 3, where=where)
        assert [i for i, _ in store.nearest(vec(1, 2), 3, where=where)] == [h.id for h in searched]
        assert [s for _, s in store.nearest(vec(1, 2), 3, where=where)] == pytest.approx([h.similarity for h in searched])
        keyword = store.keyword_search("Vienna train", 3, where=where)
        ranked = store.keyword_ranked("Vienna train", 3, where=where)
        assert [i for i, _ in ranked] == [h.id for h in keyword] and [s for _, s in ranked] == pytest.approx([h.bm25 for h in keyword])
        assert store.rows(["r2", "nope", "r3"]) == {"r2": (texts[2], {"i": 2}), "r3": (texts[3], {"i": 3})}
        assert store.rows([]) == {}

    def test_keyword_statistics_belong_to_each_knowledge_base(self, make):
        """BM25 of one KB must not change when another KB (on the same file or server) grows."""
        a = make("kb-a")
        if "keyword_search" not in a.capabilities:
            pytest.skip(f"{type(a).__name__} declares no keyword_search")
        a.upsert([Chunk("a1", "vienna night train", {}, vec(1)), Chunk("a2", "dining car goulash", {}, vec(0, 1))])
        before = [(h.id, h.bm25) for h in a.keyword_search("vienna train", 2)]
        b = make("kb-b")
        b.upsert([Chunk(f"b{i}", "vienna " * 5 + f"train {i}", {}, vec(1, i)) for i in range(30)])
        after = [(h.id, h.bm25) for h in a.keyword_search("vienna train", 2)]
        assert [i for i, _ in after] == [i for i, _ in before] == ["a1"]
        assert after[0][1] == pytest.approx(before[0][1])


class PagingTests(_Fixtures):
    """More chunks than one engine page: reads, counts, filtered deletes and searches see all of them."""

    def test_thousands_of_chunks_page_through_whole(self, store):
        chunks = rand_chunks(PAGING_CHUNKS, seed=4, prefix="p")
        for start in range(0, len(chunks), 1000):
            store.upsert(chunks[start : start + 1000])
        assert store.count() == PAGING_CHUNKS
        pages = [store.get(limit=700, offset=offset) for offset in range(0, PAGING_CHUNKS, 700)]
        assert [c.id for page in pages for c in page] == sorted(c.id for c in chunks)
        assert store.count({"even": True}) == PAGING_CHUNKS // 2
        assert len(store.get(where={"source": "doc1.md"})) == PAGING_CHUNKS // 4
        hits = store.search(chunks[2001].vector, 5, where={"n": {"$gte": 2000}})
        assert hits[0].id == "p2001" and all(h.metadata["n"] >= 2000 for h in hits)
        assert store.delete(where={"even": False}) == PAGING_CHUNKS // 2
        assert store.count() == PAGING_CHUNKS // 2 and store.get(where={"even": False}) == []


class StoreConformance(WriteTests, SearchTests, FilterTests, IsolationTests, KeywordTests, PagingTests):
    """Everything a KnowledgeStore backend must do."""
