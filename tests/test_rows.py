"""The embedded stores' write path and index: in-place writes agree with a plain model of the
KB, HNSW search finds what the exact scan finds, and a saved graph comes back after a restart."""

from __future__ import annotations

import numpy as np
import pytest

from eddi_rag.backends import registry
from eddi_rag.state.sqlite import Database
from eddi_rag.stores import filters
from eddi_rag.stores.base import Chunk, StoreContext
from eddi_rag.stores.embedded import rows as rows_module
from eddi_rag.stores.toolkit import normalise

DIM = 16


def chunk(i: int, doc: int, rng: np.random.Generator, version: int = 0) -> Chunk:
    return Chunk(f"d{doc:03d}-{i}", f"doc {doc} part {i} v{version}", {"document_id": f"d{doc:03d}", "part": i, "v": version},
                 rng.standard_normal(DIM).tolist())


def exact(model: dict[str, Chunk], q, k: int, keep=lambda c: True) -> list[str]:
    live = [c for c in model.values() if keep(c)]
    if not live:
        return []
    sims = normalise([c.vector for c in live]) @ normalise(q)[0]
    return [c.id for _, c in sorted(zip(sims, live), key=lambda sc: (-sc[0], sc[1].id))[:k]]


@pytest.mark.parametrize("backend", ["in-memory", "sqlite"])
def test_many_small_writes_agree_with_a_plain_model(tmp_path, backend):
    """Replaces, upserts and deletes, enough of them that dead rows get compacted away twice."""
    rng = np.random.default_rng(5)
    store = registry.load(registry.STORES, backend)("kb", {"index": "exact"}, StoreContext(Database(tmp_path / "a.db"), tmp_path))
    model: dict[str, Chunk] = {}
    for doc in range(300):
        chunks = [chunk(i, doc, rng) for i in range(8)]
        store.upsert(chunks)
        model.update({c.id: c for c in chunks})
    for step in range(700):
        doc = int(rng.integers(0, 300))
        if step % 7 == 0:
            removed = store.delete(where={"document_id": f"d{doc:03d}"})
            assert removed == sum(c.metadata["document_id"] == f"d{doc:03d}" for c in model.values())
            model = {i: c for i, c in model.items() if c.metadata["document_id"] != f"d{doc:03d}"}
        else:
            chunks = [chunk(i, doc, rng, step) for i in range(int(rng.integers(1, 9)))]
            store.replace({"document_id": f"d{doc:03d}"}, chunks)
            model = {i: c for i, c in model.items() if c.metadata["document_id"] != f"d{doc:03d}"}
            model.update({c.id: c for c in chunks})
        if step % 50 == 0:
            q = rng.standard_normal(DIM).tolist()
            assert [h.id for h in store.search(q, 7)] == exact(model, q, 7)
            assert [h.id for h in store.search(q, 5, where={"part": {"$lt": 3}})] == exact(model, q, 5, lambda c: c.metadata["part"] < 3)
    assert store.count() == len(model)
    got = {c.id: c for c in store.get()}
    assert sorted(got) == sorted(model)
    assert all(got[i].text == model[i].text and got[i].metadata == model[i].metadata for i in model)
    assert store.delete(ids=list(model)[:10]) == 10


@pytest.mark.parametrize("backend", ["in-memory", "sqlite"])
def test_hnsw_finds_what_the_exact_scan_finds_also_with_filters(tmp_path, monkeypatch, backend):
    monkeypatch.setattr(rows_module, "EXACT_BELOW", 0)  # filtered searches walk the graph too
    rng = np.random.default_rng(9)
    ctx = StoreContext(Database(tmp_path / "h.db"), tmp_path)
    store = registry.load(registry.STORES, backend)("kb", {"index": "hnsw"}, ctx)
    model = {}
    for doc in range(250):
        chunks = [chunk(i, doc, rng) for i in range(8)]
        store.upsert(chunks)
        model.update({c.id: c for c in chunks})
    store.search([1.0] * DIM, 1)  # builds the graph
    for doc in range(0, 250, 10):  # writes after the build: the graph takes them incrementally
        chunks = [chunk(i, doc, rng, 1) for i in range(8)]
        store.replace({"document_id": f"d{doc:03d}"}, chunks)
        model.update({c.id: c for c in chunks})
    found = total = 0
    for _ in range(20):
        q = rng.standard_normal(DIM).tolist()
        for where, keep in [(None, lambda c: True), ({"part": 2}, lambda c: c.metadata["part"] == 2),
                            ({"v": 1}, lambda c: c.metadata["v"] == 1)]:
            hits = store.search(q, 5, where=where)
            assert all(keep(model[h.id]) for h in hits) and len(hits) == 5
            found += len({h.id for h in hits} & set(exact(model, q, 5, keep)))
            total += 5
    assert found / total >= 0.95  # approximate, but on 2,000 vectors it misses next to nothing
    assert store.health()["details"]["index"] == "hnsw"


def test_auto_switches_to_the_graph_at_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(rows_module, "AUTO_HNSW_FROM", 50)
    rng = np.random.default_rng(1)
    store = registry.load(registry.STORES, "in-memory")("kb", {}, StoreContext(Database(), tmp_path))
    store.upsert([chunk(i, 0, rng) for i in range(49)])
    assert store.health()["details"]["index"] == "exact"
    store.upsert([chunk(i, 1, rng) for i in range(5)])
    assert store.health()["details"]["index"] == "hnsw"


def test_sqlite_graph_is_saved_and_reused_and_other_writers_are_seen(tmp_path, monkeypatch):
    monkeypatch.setattr(rows_module, "EXACT_BELOW", 0)
    rng = np.random.default_rng(2)
    path = tmp_path / "kb.db"
    first_ctx = StoreContext(Database(path), tmp_path)
    sqlite = registry.load(registry.STORES, "sqlite")
    first = sqlite("kb", {"index": "hnsw"}, first_ctx)
    chunks = [chunk(i, d, rng) for d in range(50) for i in range(4)]
    first.upsert(chunks)
    q = chunks[17].vector
    assert first.search(q, 1)[0].id == chunks[17].id  # builds the graph and saves it
    saved = list((tmp_path / "kb.db.hnsw").iterdir())
    assert len(saved) == 2
    first.upsert([Chunk("late", "late", {}, q)])
    first_ctx.close()  # saves the graph with the late chunk

    second_ctx = StoreContext(Database(path), tmp_path)
    second = sqlite("kb", {"index": "hnsw"}, second_ctx)
    assert [h.id for h in second.search(q, 2)] == sorted(["late", chunks[17].id])
    cache = second_ctx.state["sqlite-tables"][(str(path), "kb")]
    assert cache.saved == cache.generation  # the graph came from the file, not a rebuild

    # another process writes: the first process's next search sees it, catching up through the log (its graph kept)
    graph = cache.table.hnsw
    third = sqlite("kb", {"index": "hnsw"}, StoreContext(Database(path), tmp_path))
    third.replace({"document_id": "d004"}, [Chunk("d004-new", "new", {"document_id": "d004"}, q)])
    assert "d004-new" in [h.id for h in second.search(q, 3)]
    assert cache.table.hnsw is graph and "d004-new" in cache.table.row_of
    assert not second.get(where={"document_id": "d004", "part": 1})
    assert [h.id for h in second.search(chunks[16].vector, 1, where={"document_id": "d004"})] == ["d004-new"]
    second.drop()
    assert not list((tmp_path / "kb.db.hnsw").iterdir())
    # dropped and written again as often through another process: this one reads the KB again, never its old rows
    third.upsert([Chunk("one", "one", {}, q)])
    assert third.search(q, 5)[0].id == "one"
    second.drop()
    for i in range(3):
        third.upsert([Chunk(f"again{i}", "again", {}, q)])
    assert sorted(h.id for h in third.search(q, 5)) == sorted(h.id for h in second.search(q, 5)) == ["again0", "again1", "again2"]


def test_search_breadth_grows_with_the_graph_unless_chosen():
    from eddi_rag.stores.embedded.ann import Hnsw, default_ef

    assert default_ef(5_000) == default_ef(100_000) == 64 and default_ef(1_000_000) == 192
    assert Hnsw(4).ef_search == 64 and Hnsw(4, 200).ef_search == 200


def test_sqlite_keyword_index_is_kept_current_by_writes_and_rebuilt_after_another_writer(tmp_path):
    """Issue 34, point 1: BM25 over a tantivy index held beside the rows. A write through this process updates it in
    place, and so does a write by another process (its own cache, the same file: issue 46, through the log of the
    chunks each write changed); filters stay exact even when the best keyword matches are filtered out."""
    path = tmp_path / "kb.db"
    sqlite = registry.load(registry.STORES, "sqlite")
    ctx = StoreContext(Database(path), tmp_path)
    store = sqlite("kb", {}, ctx)
    store.upsert([Chunk(f"t{i}", f"night train {i} to Vienna", {"document_id": "trains", "i": i}, [1.0, 0.0]) for i in range(40)]
                 + [Chunk("dining", "the dining car serves goulash", {"document_id": "dining"}, [0.0, 1.0])])
    assert [h.id for h in store.keyword_search("goulash", 5)] == ["dining"]
    cache = ctx.state["sqlite-tables"][(str(path), "kb")]
    index = cache.keywords
    store.replace({"document_id": "dining"}, [Chunk("dining2", "the dining car serves strudel", {"document_id": "dining"}, [0.0, 1.0])])
    assert store.keyword_search("goulash", 5) == [] and [h.id for h in store.keyword_search("strudel", 5)] == ["dining2"]
    store.delete(ids=["t3"])
    assert "t3" not in {h.id for h in store.keyword_search("night train", 50)}
    assert cache.keywords is index  # kept current in place, not built again

    other = sqlite("kb", {}, StoreContext(Database(path), tmp_path))  # another process: its own cache
    other.upsert([Chunk("zeppelin", "a zeppelin over Vienna", {"document_id": "air"}, [1.0, 1.0])])
    assert [h.id for h in store.keyword_search("zeppelin", 5)] == ["zeppelin"]
    other.delete(ids=["t5"])
    assert "t5" not in {h.id for h in store.keyword_search("night train", 50)}
    assert cache.keywords is index  # caught up in place, not built again

    # the 40 best matches for "train" are filtered out: more candidates are asked until k pass
    hits = store.keyword_search("night train vienna", 3, where={"document_id": {"$ne": "trains"}})
    assert [h.id for h in hits] == ["zeppelin"]
    assert [h.id for h in store.keyword_search("train", 2, where={"i": {"$gte": 38}})] in (["t38", "t39"], ["t39", "t38"])


def test_once_built_the_graph_holds_the_only_copy_of_the_vectors():
    """Issue 34, point 3: the row table kept a second float32 copy beside faiss's. Once the graph is built, the
    vectors live in it alone (the exact scan reads them there); rows written later go into it; a compaction takes
    them back into a matrix until the graph is built again."""
    rng = np.random.default_rng(3)
    table = rows_module.RowTable("hnsw")
    first = normalise(rng.standard_normal((3000, DIM)))
    table.add([f"r{i}" for i in range(3000)], first, [{"i": i} for i in range(3000)])
    assert table._matrix is not None
    assert table.search(first[7], 1)[0][0] == table.row_of["r7"]  # builds the graph
    assert table._matrix is None and np.array_equal(table.vectors, first) and table.nbytes() == first.nbytes
    later = normalise(rng.standard_normal((10, DIM)))
    table.add([f"n{i}" for i in range(10)], later, [{"i": -1}] * 10)
    assert table._matrix is None and table.hnsw is not None and table.hnsw.size == table.n == 3010
    assert table._exact(later[3], 1, None, table.n)[0][0] == table.row_of["n3"]  # the exact scan reads the graph's copy
    assert table.search(later[4], 1, filters.node({"i": -1}))[0][0] == table.row_of["n4"]
    table.add([f"r{i}" for i in range(2000)], normalise(rng.standard_normal((2000, DIM))), [{"i": i} for i in range(2000)])
    assert table.hnsw is None and table._matrix is not None and len(table) == table.n == 3010  # compacted: 2,000 dead
    assert table.search(later[5], 1)[0][0] == table.row_of["n5"] and table._matrix is None  # the graph again


def test_a_string_equality_is_answered_from_its_sorted_index_as_the_table_grows_and_compacts(monkeypatch):
    """The rows a document's filter names (the neighbour fetch; several documents' at once, an Or) agree with the
    filter evaluated row by row, before and after the sorted index is rebuilt, with rows appended since it was built,
    and after compaction; an Or one of whose branches names no rows by an equality is scanned."""
    monkeypatch.setattr("eddi_rag.stores.embedded.masks.RESORT_FROM", 50)
    rng = np.random.default_rng(11)
    table = rows_module.RowTable()
    live: dict[str, dict] = {}
    compactions = 0
    for step in range(150):
        doc = f"d{int(rng.integers(0, 40)):02d}"
        metas = [{"document_id": doc, "position_in_doc": i, "user_id": "u1" if i % 3 else 7} for i in range(int(rng.integers(1, 40)))]
        ids = [f"{doc}-{step}-{i}" for i in range(len(metas))]
        used = table.n
        table.remove(table.rows(filters.parse({"document_id": doc})).tolist())
        compactions += table.n < used
        live = {i: m for i, m in live.items() if m["document_id"] != doc}
        table.add(ids, normalise(rng.standard_normal((len(ids), DIM))), metas)
        live.update(zip(ids, metas))
        for where in ({"document_id": doc}, {"document_id": "d07", "position_in_doc": {"$gte": 3, "$lte": 9}},
                      {"$and": [{"document_id": doc}, {"user_id": "u1"}]}, {"document_id": "nobody"},
                      {"$or": [{"document_id": doc, "position_in_doc": {"$lte": 4}}, {"document_id": "d07"}]},
                      {"$and": [{"$or": [{"document_id": "d01"}, {"document_id": "d02"}]}, {"user_id": "u1"}]},
                      {"$or": [{"document_id": doc}, {"position_in_doc": 2}]}):
            node = filters.parse(where)
            want = sorted(i for i, m in live.items() if filters.matches(node, m))
            assert sorted(table.id_of(r) for r in table.rows(node)) == want, (step, where)
            mask = table.select(node)
            assert sorted(table.id_of(r) for r in np.flatnonzero(mask)) == want
    assert len(table) == len(live) and compactions


def test_a_selective_filter_asked_again_searches_a_contiguous_copy_exactly_and_never_a_stale_one():
    """A reader's ACL names a tenth of the rows, query after query: the second time its rows' vectors are copied
    contiguous and searched exactly (what the graph would have to walk wide for); a write invalidates the copy."""
    rng = np.random.default_rng(3)
    table = rows_module.RowTable("exact")
    matrix = rng.standard_normal((4000, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    table.add([f"r{i:04d}" for i in range(4000)], matrix, [{"acl": [f"group:g{i % 10}"]} for i in range(4000)])
    node = filters.parse({"acl": {"$containsAny": ["group:g0"]}})
    q = matrix[10]

    def exact(qv: np.ndarray) -> list[str]:
        allowed = [i for i in range(table.n) if table.ids[i] is not None and i % 10 == 0]
        sims = table.vectors[allowed] @ qv
        return [table.ids[allowed[j]] for j in np.argsort(-sims, kind="stable")[:5]]

    first = [table.ids[r] for r, _ in table.search(q, 5, node)]
    assert not any(entry.vectors is not None for entry in table._subsets.values())  # asked once: remembered, not copied
    second = [table.ids[r] for r, _ in table.search(q, 5, node)]
    assert any(entry.vectors is not None for entry in table._subsets.values())
    assert first == second == exact(q) and first[0] == "r0010"
    table.add(["r0010"], (-matrix[10])[None, :], [{"acl": ["group:g0"]}])  # the best row turns away
    table.search(q, 5, node)
    assert [table.ids[r] for r, _ in table.search(q, 5, node)] == exact(q) and "r0010" not in exact(q)


def test_a_large_subset_asked_again_and_again_gets_a_graph_of_its_own_and_loses_it_at_a_write(monkeypatch):
    """The third time a large reader's rows are searched, a graph of just those rows is built in the background (the
    exact copy answers meanwhile); it then answers as the exact scan does, and a write drops it with the copy."""
    monkeypatch.setattr(rows_module, "SUBSET_GRAPH_FROM", 200)
    rng = np.random.default_rng(5)
    table = rows_module.RowTable("hnsw")
    matrix = rng.standard_normal((3000, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    table.add([f"r{i:04d}" for i in range(3000)], matrix, [{"acl": [f"group:g{i % 10}"]} for i in range(3000)])
    node = filters.parse({"acl": {"$containsAny": ["group:g0"]}})

    def exact(qv: np.ndarray) -> list[str]:
        allowed = [i for i in range(table.n) if table.ids[i] is not None and i % 10 == 0]
        sims = table.vectors[allowed] @ qv
        return [table.ids[allowed[j]] for j in np.argsort(-sims, kind="stable")[:5]]

    for _ in range(3):
        assert [table.ids[r] for r, _ in table.search(matrix[20], 5, node)] == exact(matrix[20])
    table.settle(timeout=60)
    (subset,) = table._subsets.values()
    assert subset.graph is not None and subset.graph.size == 300
    for i in range(0, 3000, 150):
        assert [table.ids[r] for r, _ in table.search(matrix[i], 5, node)] == exact(matrix[i])
    table.remove([table.row_of["r0020"]])
    assert "r0020" not in [table.ids[r] for r, _ in table.search(matrix[20], 5, node)]
    assert all(s.graph is None for s in table._subsets.values())


def test_a_reload_keeps_the_tables_lock_so_the_other_half_of_a_hybrid_search_waits_for_it(tmp_path):
    """A fresh CI run's Try it answered 503 "sqlite store unavailable: LookupError: row 0 is dead": the first search
    after another writer reloads the table (``restore`` clears it) under its lock, and ``clear`` made a new lock, so the
    hybrid search's other half, run at the same time, read the half-restored table. The lock is the same one now."""
    from eddi_rag.stores.embedded.rows import RowTable

    table = RowTable("auto")
    lock = table.lock
    table.restore(["a", None, "b"], normalise(np.eye(3, 4, dtype=np.float32)), [{}, {}, {}])
    table.clear()
    assert table.lock is lock
    with lock:  # a reload in progress: another thread taking the table's lock must wait
        import threading

        entered = threading.Event()
        other = threading.Thread(target=lambda: (table.lock.acquire(), entered.set(), table.lock.release()))
        other.start()
        assert not entered.wait(0.2)
    other.join(5)
    assert entered.is_set()
