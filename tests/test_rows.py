"""The embedded stores' write path and index: in-place writes agree with a plain model of the
KB, HNSW search finds what the exact scan finds, and a saved graph comes back after a restart."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddi_rag.backends import registry
from eddi_rag.state.sqlite import Database
from eddi_rag.stores import filters
from eddi_rag.stores.base import Chunk, StoreContext
from eddi_rag.stores.embedded import rows as rows_module
from eddi_rag.stores.toolkit import normalise
from tests.support.waiting import held

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
    saved = sorted(f.suffix for f in (tmp_path / "kb.db.hnsw").iterdir())
    assert saved == [".faiss", ".json", ".lock"]
    assert first_ctx.state["sqlite-tables"][(str(path), "kb")].table.hnsw.mapped  # this process maps the file it saved
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
    assert [f.suffix for f in (tmp_path / "kb.db.hnsw").iterdir()] == [".lock"]
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


def test_a_mapped_base_and_the_rows_after_it_answer_as_one_table(tmp_path):
    """Issue 60, point 1: a graph saved to a file and mapped (its vectors the file's pages, shared by every process
    mapping it) is never added to; the rows written after it are kept beside it and searched with it. Upserts,
    deletes and filters over both parts answer as a table that holds every row itself, exactly and through the graph."""
    from eddi_rag.stores.embedded.ann import Hnsw

    rng = np.random.default_rng(60)
    first = normalise(rng.standard_normal((3000, DIM)))
    ids = [f"r{i}" for i in range(3000)]
    meta = [{"document_id": f"d{i // 10}", "even": i % 2 == 0} for i in range(3000)]
    shared, plain = rows_module.RowTable("hnsw"), rows_module.RowTable("exact")
    for table in (shared, plain):
        table.add(ids, first, meta)
    shared.graph().save(tmp_path / "base.faiss")
    assert shared.rebase(Hnsw.load(tmp_path / "base.faiss", mapped=True), shared.epoch)
    assert shared.base == 3000 and shared.delta_rows() == 0 and shared._matrix is None
    with pytest.raises(ValueError, match="read-only"):
        shared.hnsw.append(first[:1])  # (faiss would abort the process)

    later = normalise(rng.standard_normal((400, DIM)))
    moved = normalise(rng.standard_normal((50, DIM)))
    for table in (shared, plain):
        table.add([f"n{i}" for i in range(400)], later, [{"document_id": "late", "even": i % 2 == 0} for i in range(400)])
        table.add([f"r{i}" for i in range(0, 500, 10)], moved, [{"document_id": "moved", "even": True}] * 50)  # base rows upserted
        table.remove([table.row_of[f"r{i}"] for i in range(1, 300, 3)] + [table.row_of[f"n{i}"] for i in range(0, 40, 4)])
    assert shared.base == 3000 and shared.delta_rows() == 450 and len(shared) == len(plain)

    shared.index = "exact"  # the exact scan over the file's rows and the delta agrees with one matrix, row for row
    for q in (first[5], later[7], moved[3], normalise(rng.standard_normal(DIM))[0]):
        for where in (None, {"even": True}, {"document_id": "late"}, {"document_id": {"$in": ["moved", "d12"]}}):
            node = filters.node(where)
            got = [(shared.ids[r], round(s, 5)) for r, s in shared.search(q, 10, node)]
            assert got == [(plain.ids[r], round(s, 5)) for r, s in plain.search(q, 10, node)], where
    shared.index = "hnsw"  # through the graph: each row's own vector finds it, wherever it lives
    for row_id, q in (("r5", first[5]), ("n7", later[7]), ("r30", moved[3]), ("n399", later[399])):
        assert shared.ids[shared.search(q, 1)[0][0]] == row_id
    assert shared.ids[shared.search(later[9], 1, filters.node({"document_id": "late"}))[0][0]] == "n9"
    assert shared.ids[shared.search(first[5], 1, filters.node({"even": False}))[0][0]] == "r5"
    assert shared.similarities(later[9], ["n9", "r7", "gone"]) == pytest.approx(plain.similarities(later[9], ["n9", "r7", "gone"]))

    # a new base holding every row taken in its place: the delta is empty and the answers stay
    before = [r for r, _ in shared.search(later[11], 5)]
    graph = Hnsw.load(tmp_path / "base.faiss")
    graph.append(shared.delta())
    graph.save(tmp_path / "next.faiss")
    epoch = shared.epoch
    assert shared.rebase(Hnsw.load(tmp_path / "next.faiss", mapped=True), epoch)
    assert shared.base == shared.n and shared.delta_rows() == 0 and [r for r, _ in shared.search(later[11], 5)] == before
    shared.compact()  # renumbered: a base saved before cannot be taken any more
    assert not shared.rebase(Hnsw.load(tmp_path / "next.faiss", mapped=True), epoch)
    assert shared.ids[shared.search(later[11], 1)[0][0]] == "n11"


def _sqlite_kb(path, tmp_path):
    ctx = StoreContext(Database(path), tmp_path)
    return registry.load(registry.STORES, "sqlite")("kb", {"index": "hnsw"}, ctx), ctx.state, ctx


def _based_kb(tmp_path, monkeypatch, rebase_from: int, seed: int):
    """A sqlite KB of 300 chunks searched through its graph, saved as a base and mapped (new bases saved from
    ``rebase_from`` rows after it): (store, its context's state, its context, the chunks, the random generator)."""
    from eddi_rag.stores.embedded import sqlite as sqlite_module

    monkeypatch.setattr(sqlite_module, "REBASE_FROM", rebase_from)
    monkeypatch.setattr(rows_module, "EXACT_BELOW", 0)
    rng = np.random.default_rng(seed)
    store, state, ctx = _sqlite_kb(tmp_path / "kb.db", tmp_path)
    chunks = [chunk(i, d, rng) for d in range(60) for i in range(5)]
    store.upsert(chunks)
    store.search(chunks[0].vector, 1)  # built, saved, mapped
    return store, state, ctx, chunks, rng


def test_the_base_is_merged_in_the_background_and_another_process_maps_the_newer_one(tmp_path, monkeypatch):
    """Issue 60, point 1: once the rows written after a base are many, the process that has them saves a new base
    (in the background, the old file read and those rows added), maps it, and another process whose rows after its
    base grow takes that newer file instead of saving its own: both map the same file."""
    path = tmp_path / "kb.db"
    first, first_state, first_ctx, chunks, rng = _based_kb(tmp_path, monkeypatch, 50, 61)
    one = first_state["sqlite-tables"][(str(path), "kb")]
    second, second_state, _ = _sqlite_kb(path, tmp_path)
    assert second.search(chunks[3].vector, 1)[0].id == chunks[3].id
    two = second_state["sqlite-tables"][(str(path), "kb")]
    assert two.table.hnsw.mapped and two.table.hnsw.path == one.table.hnsw.path  # one file, mapped by both

    late = [chunk(i, d, rng) for d in range(100, 114) for i in range(5)]
    first.upsert(late)  # 70 rows after the base: a new one saved in the background
    one.saving.result()
    assert one.table.delta_rows() == 0 and one.saved == one.generation and one.table.hnsw.path != two.table.hnsw.path
    assert second.search(late[9].vector, 1)[0].id == late[9].id  # read through the log, kept after its base
    two.saving.result()  # its rows after its base were many: it took the newer file
    assert two.table.hnsw.path == one.table.hnsw.path and two.table.delta_rows() == 0
    assert [h.id for h in second.search(late[20].vector, 3)] == [h.id for h in first.search(late[20].vector, 3)]
    assert second.count() == first.count() == 370
    first_ctx.close()


def test_a_write_in_another_process_is_found_while_the_base_is_being_saved(tmp_path, monkeypatch):
    """Issue 60, point 1: saving a new base never holds up a reader or loses a write made meanwhile: while this
    process writes the merged file (held open here), another process writes a chunk and replaces a document; this
    process's next search finds the new chunk and not the replaced ones, and after the new base is taken the rows
    written since it began are still there (after it, in the delta)."""
    import threading

    from eddi_rag.stores.embedded.ann import Hnsw

    path = tmp_path / "kb.db"
    first, state, _, chunks, rng = _based_kb(tmp_path, monkeypatch, 10**9, 62)  # (a new base saved when this test says)
    cache = state["sqlite-tables"][(str(path), "kb")]
    first.upsert([chunk(i, 200, rng) for i in range(30)])
    assert cache.table.delta_rows() == 30

    saving, go_on = held(monkeypatch, Hnsw, "save")
    worker = threading.Thread(target=first._save_base, args=(cache,))
    worker.start()
    assert saving.wait(30)
    other, _, _ = _sqlite_kb(path, tmp_path)
    new = Chunk("written-meanwhile", "new", {"document_id": "new"}, chunks[17].vector)
    other.upsert([new])
    other.replace({"document_id": "d001"}, [])
    assert [h.id for h in first.search(chunks[17].vector, 2)] == sorted(["written-meanwhile", chunks[17].id])
    assert not first.get(where={"document_id": "d001"}) and not [h for h in first.search(chunks[6].vector, 5) if h.id.startswith("d001")]
    go_on.set()
    worker.join(30)
    assert cache.table.delta_rows() == 1 and cache.saved == cache.generation - 2  # the base holds what it began with
    assert [h.id for h in first.search(chunks[17].vector, 2)] == sorted(["written-meanwhile", chunks[17].id])
    assert not [h for h in first.search(chunks[6].vector, 5) if h.id.startswith("d001")]
    assert first.count() == 300 + 30 + 1 - 5


def test_the_keyword_index_is_one_on_disk_that_every_process_maps(tmp_path, monkeypatch):
    """Issue 60, point 1: the ``sqlite`` store keeps a knowledge base's keyword index on disk beside its file, one
    index for every process (tantivy maps its files): built once, opened by the next process, written by each
    process's own writes and brought up to date from the log by a process that did not write; a state file lagging its
    index (a process killed between the two) only makes the changes applied again, and a log that no longer reaches
    makes it built afresh."""
    import sqlite3

    from eddi_rag.stores.embedded import keywords as keywords_module

    builds = []
    build = keywords_module.KeywordIndex.__init__

    def counted(self, rows, path=None):
        builds.append(path)
        build(self, rows, path)

    monkeypatch.setattr(keywords_module.KeywordIndex, "__init__", counted)
    path = tmp_path / "kb.db"

    def kb():
        return registry.load(registry.STORES, "sqlite")("kb", {}, StoreContext(Database(path), tmp_path))

    first = kb()
    first.upsert([Chunk("en", "The cat sleeps on the sofa", {"language": "en"}, [1.0, 0.0]),
                  Chunk("de", "Die Katzen schlafen auf dem Sofa", {"language": "de"}, [0.0, 1.0]),
                  Chunk("zh", "猫在沙发上睡觉", {"language": "zh"}, [1.0, 1.0])])
    assert [h.id for h in first.keyword_search("Katze", 3)] == ["de"]
    assert len(builds) == 1 and builds[0] is not None and (tmp_path / "kb.db.keywords").is_dir()

    second = kb()  # another process: it opens the index the first built
    assert [h.id for h in second.keyword_search("沙发", 3)] == ["zh"] and len(builds) == 1
    second.upsert([Chunk("de2", "Der Hund schläft im Garten", {"language": "de"}, [0.5, 0.5])])  # its own write, into the index
    state = next((tmp_path / "kb.db.keywords").glob("*.json"))
    generation = sqlite3.connect(path).execute("SELECT generation FROM kb_chunk_generations").fetchone()[0]
    assert json_of(state)["generation"] == generation
    assert [h.id for h in first.keyword_search("Hunde", 3)] == ["de2"] and len(builds) == 1  # seen, not built
    first.delete(ids=["en"])
    assert second.keyword_search("cat", 3) == []  # the first's delete, seen by the second

    state.write_text(json.dumps({**json_of(state), "generation": generation - 1}))  # killed before the state was written
    third = kb()
    assert sorted(h.id for h in third.keyword_search("Sofa schlafen", 5)) == ["de"] and len(builds) == 1  # applied again
    with sqlite3.connect(path) as db:  # the log no longer reaches: built afresh
        db.execute("DELETE FROM kb_chunk_log")
    state.write_text(json.dumps({**json_of(state), "generation": 0}))
    assert sorted(h.id for h in kb().keyword_search("schläft Sofa 沙发", 5)) == ["de", "de2", "zh"] and len(builds) == 2
    third.drop()  # the texts' terms leave the disk with the knowledge base
    assert [f.name for f in (tmp_path / "kb.db.keywords").iterdir()] == [state.name.replace(".json", ".lock")]
    assert first.keyword_search("Sofa", 5) == [] and second.keyword_search("沙发", 5) == []


def json_of(path):
    return json.loads(path.read_text())


_op = st.one_of(st.tuples(st.just("add"), st.integers(1, 40), st.integers(0, 200)),  # (how many, first id: some exist)
                st.tuples(st.just("remove"), st.integers(1, 30), st.integers(0, 10**6)),
                st.tuples(st.just("rebase"), st.just(0), st.just(0)),
                st.tuples(st.just("compact"), st.just(0), st.just(0)))


@settings(max_examples=40, deadline=None)
@given(st.lists(_op, min_size=1, max_size=12), st.integers(0, 2**32 - 1))
def test_a_mapped_base_answers_as_one_table_whatever_is_written(ops, seed):
    """Issue 60, point 1 (property): adds (new ids and upserts), removes, new bases merged from base and delta, and
    compactions, in any order: the exact scan over a mapped base and its delta answers row for row as one matrix,
    and the graph finds each live row by its own vector."""
    import tempfile
    from pathlib import Path

    from eddi_rag.stores.embedded.ann import Hnsw

    rng = np.random.default_rng(seed)
    folder = Path(tempfile.mkdtemp())
    shared, plain = rows_module.RowTable("exact"), rows_module.RowTable("exact")
    first = normalise(rng.standard_normal((120, 8)))
    for table in (shared, plain):
        table.add([f"r{i}" for i in range(120)], first, [{"even": i % 2 == 0} for i in range(120)])
    shared.graph().save(folder / "0.faiss")
    assert shared.rebase(Hnsw.load(folder / "0.faiss", mapped=True), shared.epoch)
    for step, (op, count, at) in enumerate(ops):
        if op == "add":
            vectors = normalise(rng.standard_normal((count, 8)))
            ids, meta = [f"r{at + i}" for i in range(count)], [{"even": (at + i) % 2 == 0} for i in range(count)]
            for table in (shared, plain):
                table.add(ids, vectors, meta)
        elif op == "remove" and len(plain):
            live = sorted(plain.row_of)
            gone = [live[(at + 7 * i) % len(live)] for i in range(min(count, len(live)))]
            for table in (shared, plain):
                table.remove([table.row_of[i] for i in set(gone) if i in table.row_of])
        elif op == "rebase" and shared.n:  # merged from the base and the delta, or (after a compaction) built again
            if shared.hnsw is not None and shared.hnsw.mapped:
                graph = Hnsw.load(shared.hnsw.path)
                graph.append(shared.delta())
            else:
                graph = shared.graph()
            graph.save(folder / f"{step + 1}.faiss")
            assert shared.rebase(Hnsw.load(folder / f"{step + 1}.faiss", mapped=True), shared.epoch)
        elif op == "compact":
            shared.compact()
            plain.compact()
        assert len(shared) == len(plain) and shared.base + shared.delta_rows() in (shared.n, 0)
        for q in (first[at % 120], normalise(rng.standard_normal(8))[0]):
            for node in (None, filters.node({"even": True})):
                got = [(shared.ids[r], round(s, 4)) for r, s in shared.search(q, 5, node)]
                assert got == [(plain.ids[r], round(s, 4)) for r, s in plain.search(q, 5, node)]
    shared.index = "hnsw"
    for row_id in list(plain.row_of)[:20]:
        q = plain.vectors[plain.row_of[row_id]]
        assert shared.ids[shared.search(q, 1)[0][0]] in {row_id, *(plain.ids[r] for r, s in plain.search(q, 3) if s > 0.9999)}


def test_a_process_whose_save_was_skipped_takes_the_base_another_saved(tmp_path, monkeypatch):
    """Issue 60, point 1: two processes build their graphs at once; the one that finds the other saving (the lock file
    held) skips its own save, and at its next search takes the base the other saved: both map one file."""
    import fcntl

    monkeypatch.setattr(rows_module, "EXACT_BELOW", 0)
    rng = np.random.default_rng(63)
    path = tmp_path / "kb.db"
    first, first_state, _ = _sqlite_kb(path, tmp_path)
    chunks = [chunk(i, d, rng) for d in range(40) for i in range(5)]
    first.upsert(chunks)
    second, second_state, _ = _sqlite_kb(path, tmp_path)
    one, two = (state["sqlite-tables"][(str(path), "kb")] for state in (first_state, second_state))
    folder = tmp_path / "kb.db.hnsw"
    folder.mkdir()
    name = second._base_files()[1]
    with open(folder / f"{name}.lock", "a") as lock:  # another process saving
        fcntl.flock(lock, fcntl.LOCK_EX)
        assert second.search(chunks[1].vector, 1)[0].id == chunks[1].id  # its graph built, its save skipped
        assert not two.table.hnsw.mapped and two.again
    first.search(chunks[2].vector, 1)  # built and saved
    assert one.table.hnsw.mapped
    assert second.search(chunks[3].vector, 1)[0].id == chunks[3].id
    two.saving.result()
    assert two.table.hnsw.mapped and two.table.hnsw.path == one.table.hnsw.path and not two.again
    assert len(list(folder.glob("*.faiss"))) == 1  # (the second never wrote one of its own)
