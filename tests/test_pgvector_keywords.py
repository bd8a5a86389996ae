"""pgvector's keyword search: the embedded store's BM25 index kept beside PostgreSQL in each process, current with
every write of every process through PostgreSQL's log of them (issue 46, point 1), against a real PostgreSQL +
pgvector. "Another process" is a store opened on another connection string to the same database: its own index in
this process's cache and its own connection, exactly what a second replica has."""

import pytest

from eddi_rag.state.sqlite import Database
from eddi_rag.stores import pgvector_keywords
from eddi_rag.stores.base import Chunk, StoreContext
from eddi_rag.stores.embedded.sqlite import SqliteStore
from eddi_rag.stores.pgvector import PgVectorStore

pytestmark = [pytest.mark.integration, pytest.mark.services]

TEXTS = ["The night train to Vienna leaves at 22:10.", "Goulash is served in the dining car until nine.",
         "A timetable of every train between Vienna and Graz.", "Apple strudel with vanilla sauce.",
         "Sleeper cabins on the night train have two or three beds.", "Bicycles travel free on regional trains."]


def chunks(texts: list[str], prefix: str = "c", **metadata) -> list[Chunk]:
    return [Chunk(f"{prefix}{i}", t, {"i": i, **metadata}, [1.0, float(i + 1), 0.5]) for i, t in enumerate(texts)]


@pytest.fixture
def ctx(tmp_path):
    return StoreContext(Database(tmp_path / "x.db"))


@pytest.fixture
def stores(pgvector_params, ctx, request):
    """(this process's store, another process's store) on one new table."""
    kb = "kw-" + request.node.name[-40:].replace("_", "-")
    here = PgVectorStore(kb, pgvector_params, ctx)
    there = PgVectorStore(kb, {"url": pgvector_params["url"] + ("&" if "?" in pgvector_params["url"] else "?")
                               + "application_name=replica"}, ctx)
    here.drop()
    yield here, there
    here.drop()
    here.close()
    there.close()


def ranked(store, text: str, k: int = 10, where=None) -> list[tuple[str, float]]:
    return [(h.id, round(h.bm25, 4)) for h in store.keyword_search(text, k, where=where)]


def test_keyword_search_is_the_embedded_store_s_bm25(stores, ctx):
    here, _ = stores
    embedded = SqliteStore("same", {}, ctx)
    for store in (here, embedded):
        store.upsert(chunks(TEXTS))
    for question in ("night train Vienna", "When is goulash served?", "bicycles", "zeppelin"):
        assert ranked(here, question) == ranked(embedded, question)
        assert ranked(here, question, where={"i": {"$gte": 2}}) == ranked(embedded, question, where={"i": {"$gte": 2}})
    assert here.keyword_scores("night train", ["c0", "c1", "c4"]) == pytest.approx(embedded.keyword_scores("night train", ["c0", "c1", "c4"]))


def test_every_write_of_another_process_is_found_by_the_next_keyword_search(stores):
    here, there = stores
    there.upsert(chunks(TEXTS))
    assert [i for i, _ in ranked(here, "strudel")] == ["c3"]  # built from PostgreSQL at the first search
    there.upsert([Chunk("c3", "Apple pie.", {"i": 3}, [1.0, 4.0, 0.5]), *chunks(["Strudel from Vienna."], "n")])
    assert [i for i, _ in ranked(here, "strudel")] == ["n0"]  # patched from the log: the new text, the new chunk
    there.delete(ids=["n0"])
    assert ranked(here, "strudel") == []
    there.replace({"i": {"$lte": 1}}, chunks(["Strudel again."], "r"))  # c0 and c1 gone, r0 written
    assert [i for i, _ in ranked(here, "strudel goulash night")] == ["r0", "c4"]
    # and the patched index holds what one built from scratch holds (its scores count the chunks taken out until
    # tantivy merges its segments, as Lucene's do)
    scratch = pgvector_keywords._Cached()
    with scratch.lock:
        built = pgvector_keywords.current(here._conn, here.table, here._ident, scratch)
    question = "strudel goulash night train sauce bicycles"
    assert {i for i, _ in built.search(question, 10)} == {i for i, _ in ranked(here, question)} == {"r0", "c2", "c4", "c5"}


def test_a_process_behind_what_the_log_keeps_builds_its_index_again(stores, monkeypatch):
    here, there = stores
    monkeypatch.setattr(pgvector_keywords, "KEPT", 2)
    there.upsert(chunks(TEXTS))
    assert [i for i, _ in ranked(here, "strudel")] == ["c3"]
    for n in range(8):  # eight write transactions: the log keeps the last two
        there.upsert([Chunk(f"s{n}", f"Strudel number {n}.", {"i": 10 + n}, [1.0, 2.0, 0.5])])
    assert {i for i, _ in ranked(here, "strudel")} == {"c3", *(f"s{n}" for n in range(8))}


def test_a_table_dropped_and_made_again_is_not_read_from_the_old_index(stores):
    here, there = stores
    there.upsert(chunks(TEXTS))
    assert [i for i, _ in ranked(here, "strudel")] == ["c3"]
    there.drop()
    there.upsert(chunks(["Strudel, made again."], "again"))  # generation 1 again would have looked current
    assert [i for i, _ in ranked(here, "strudel")] == ["again0"]


def test_who_may_read_is_decided_before_the_best_are_taken(stores):
    """A reader who may read one chunk in a hundred is not handed the others first (the acl is in the index's query)."""
    here, there = stores
    there.upsert([Chunk(f"o{i}", f"Strudel recipe {i}.", {"acl": ["group:others"]}, [1.0, 1.0, float(i)]) for i in range(100)]
                 + [Chunk("mine", "A strudel recipe.", {"acl": ["group:mine"]}, [1.0, 1.0, 1.0])])
    assert [i for i, _ in ranked(here, "strudel recipe", 3, where={"acl": {"$containsAny": ["group:mine"]}})] == ["mine"]
    assert "mine" not in {i for i, _ in ranked(here, "strudel recipe", 200, where={"acl": {"$containsNone": ["group:mine"]}})}


def test_a_replace_through_a_store_opened_before_the_table_removes_what_another_process_wrote(stores):
    """A replica's store object made before the table existed replaced a document's chunks without deleting the old
    ones (it believed the table empty): both versions were then found."""
    here, there = stores
    here.count()  # (opened, and asked, while there is no table)
    there.upsert(chunks(["Old strudel."], "v1-", document_id="recipe"))
    here.replace({"document_id": "recipe"}, chunks(["New strudel."], "v2-", document_id="recipe"))
    assert [c.id for c in there.get()] == ["v2-0"]
    assert [i for i, _ in ranked(there, "strudel")] == ["v2-0"]
