"""The embedded state's schema: versioned (PRAGMA user_version), migrated in one place, and a database
made by the release before versions opens with everything in it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from eddi_rag import state
from eddi_rag.runtime import DB_FILE, Runtime
from eddi_rag.state.schema import NewerDatabaseError
from eddi_rag.state.sqlite import Database

BEFORE_VERSIONS = Path(__file__).parent / "data" / "state-before-versions.sql"
KEY = "erk_fe1616cfc66f_ZlVGmmUyLkBeuQRZqB76joYYIUEVP0b7PvZF6IQ7ojY"  # the dump's editor key


def restore(folder: Path, dump: Path = BEFORE_VERSIONS) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(folder / DB_FILE) as c:
        c.executescript(dump.read_text())
    return folder


def test_a_database_of_the_release_before_versions_opens_with_everything_in_it(tmp_path):
    data = restore(tmp_path / "data")
    with Runtime(data) as rt:
        assert state.version(rt.db) == state.LATEST
        assert rt.resources.tenant_of("rags", "handbook") == "acme"
        assert rt.knowledge_bases.get("handbook").name == "Handbook"
        assert [h.metadata["source"] for h in rt.query("handbook", "How long is parental leave?")] == ["leave.md"]
        assert [j.document for j in rt.jobs.of_kb("handbook")] == ["queued.md"]
        assert rt.keys.authenticate(KEY).tenant == "acme"
        assert [f["question"] for f in rt.feedback.list("acme")] == ["How long is leave?"]
        rt.ingest("handbook", "travel.md", "Travel is booked through the portal.")  # and it writes
    with Runtime(data) as again:  # the second opening has nothing to do
        assert state.version(again.db) == state.LATEST
        assert {d["documentId"] for d in again.documents.list("handbook")["documents"]} == {"leave.md", "travel.md"}


def test_an_older_database_gets_the_columns_added_before_versions(tmp_path):
    db = Database(tmp_path / "old.db")
    db.execute("CREATE TABLE resources (kind TEXT NOT NULL, id TEXT NOT NULL, current_version INTEGER NOT NULL, name TEXT NOT NULL, "
               "description TEXT NOT NULL, created_on TEXT NOT NULL, last_modified_on TEXT NOT NULL, deleted INTEGER NOT NULL DEFAULT 0, "
               "PRIMARY KEY (kind, id))")
    db.execute("CREATE TABLE ingestion_jobs (id TEXT PRIMARY KEY, kb_id TEXT NOT NULL, version INTEGER NOT NULL, document TEXT NOT NULL, "
               "status TEXT NOT NULL, body TEXT, chunks INTEGER, created_on TEXT NOT NULL, updated_on TEXT NOT NULL)")
    db.execute("INSERT INTO resources VALUES ('rags', 'kb', 1, 'Old', '', 't', 't', 0)")
    db.execute("INSERT INTO ingestion_jobs VALUES ('j1', 'kb', 1, 'a.txt', 'failed: x', 'the text it was given', NULL, 't', 't')")
    state.migrate(db)
    columns = {r["name"] for r in db.query("PRAGMA table_info(ingestion_jobs)")}
    assert {"format", "attempts", "document_id"} <= columns and "body" not in columns  # (version 14: in a table of its own)
    assert [tuple(r) for r in db.query("SELECT id, body FROM ingestion_bodies")] == [("j1", "the text it was given")]
    assert db.query("SELECT tenant FROM resources")[0]["tenant"] == "default"
    assert state.version(db) == state.LATEST


def test_a_database_of_a_newer_release_is_refused_untouched(tmp_path):
    db = Database(tmp_path / "new.db")
    db.execute(f"PRAGMA user_version = {state.LATEST + 1}")
    with pytest.raises(NewerDatabaseError, match="newer eddi-rag"):
        state.migrate(db)
    assert db.query("SELECT name FROM sqlite_master") == []


def test_every_state_table_is_created_by_the_schema_module_alone():
    source = Path(state.__file__).parents[1]
    creating = sorted(str(p.relative_to(source)) for p in source.rglob("*.py")
                      if "CREATE TABLE" in p.read_text() and "stores" not in p.relative_to(source).parts)
    assert creating == ["state/schema.py"]


def test_store_claims_move_to_the_one_spelling_of_their_place(tmp_path):
    """Migration 16 (issue 42): a claim recorded under a spelling ownership no longer produces keeps its KB's hold (a
    created store stays droppable by it, another tenant's new spelling is still refused)."""
    from eddi_rag.state.sqlite import Database

    db = Database(tmp_path / "state.db")
    state.migrate(db)
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    rows = [("pgvector", "Public.Team_Docs", "kb1"), ("pgvector", '"Quoted"', "kb2"), ("qdrant", f"{tmp_path}/link/../link#Docs", "kb3"),
            ("chroma", "Team_Docs", "kb4")]
    for engine, place, kb in rows:
        db.execute("INSERT INTO store_claims VALUES (?, ?, 'A', ?, 'created', 'ours', '', '2026-01-01T00:00:00Z')", (engine, place, kb))
    with db.transaction() as c:
        state.schema._canonical_places(c)
    places = {r["kb_id"]: r["place"] for r in db.query("SELECT kb_id, place FROM store_claims")}
    assert places == {"kb1": "team_docs", "kb2": '"Quoted"', "kb3": f"{(tmp_path / 'real').resolve()}#docs", "kb4": "team_docs"}
