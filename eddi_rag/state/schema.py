"""The state's tables in one place, and their migrations, the same on SQLite and PostgreSQL (``sqlite``, ``postgres``):
the schema's version is SQLite's ``PRAGMA user_version`` or PostgreSQL's ``eddi_rag_schema`` table;
``migrate`` brings a database up to ``LATEST`` in one transaction (on PostgreSQL under the fleet's write
lock: one process migrates, the others find it done), once per connection, and refuses a database
written by a newer release. Every component that keeps state
(resources, keys, jobs, sources, collections, feedback, notes, the embedding cache, generations)
calls ``migrate`` on the database it is given instead of creating tables itself. The embedded store
engines' own tables (``stores/embedded/sqlite.py``, ``sqlite_vec.py``) belong to those engines.

A change of the schema is a new entry at the end of ``MIGRATIONS``; an entry never changes once
released. Version 1 is the schema as it stood before versions: it also brings a database of an
older release up (columns that were added then without a version)."""

from __future__ import annotations

import json
import os
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import POSTGRESQL, Database, StateDatabase

TABLES = (
    """CREATE TABLE IF NOT EXISTS resource_versions (
        kind TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, data TEXT NOT NULL, created_on TEXT NOT NULL,
        PRIMARY KEY (kind, id, version))""",
    """CREATE TABLE IF NOT EXISTS resources (
        kind TEXT NOT NULL, id TEXT NOT NULL, current_version INTEGER NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,
        created_on TEXT NOT NULL, last_modified_on TEXT NOT NULL, deleted INTEGER NOT NULL DEFAULT 0,
        tenant TEXT NOT NULL DEFAULT 'default', PRIMARY KEY (kind, id))""",
    """CREATE TABLE IF NOT EXISTS api_keys (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, role TEXT NOT NULL,
        user_id TEXT, acts_for_users INTEGER NOT NULL DEFAULT 0, name TEXT, hash TEXT NOT NULL,
        created_on TEXT NOT NULL, revoked_on TEXT)""",
    # ``body``: the file's bytes or, in jobs written before files were supported, text (declared TEXT then:
    # in SQLite either is kept as given; BLOB names what PostgreSQL must hold); since version 14 in
    # ``ingestion_bodies``; ``format``: what loaders.detect decided (NULL in those older jobs: plain text)
    """CREATE TABLE IF NOT EXISTS ingestion_jobs (
        id TEXT PRIMARY KEY, kb_id TEXT NOT NULL, version INTEGER NOT NULL, document TEXT NOT NULL,
        status TEXT NOT NULL, body BLOB, chunks INTEGER, created_on TEXT NOT NULL, updated_on TEXT NOT NULL,
        format TEXT, attempts INTEGER NOT NULL DEFAULT 0)""",
    "CREATE TABLE IF NOT EXISTS kb_generations (kb_id TEXT PRIMARY KEY, n INTEGER NOT NULL)",
    """CREATE TABLE IF NOT EXISTS collections (tenant TEXT NOT NULL, name TEXT NOT NULL, metadata TEXT NOT NULL,
        dimension INTEGER, created_on TEXT NOT NULL, last_modified_on TEXT NOT NULL, PRIMARY KEY (tenant, name))""",
    """CREATE TABLE IF NOT EXISTS source_runs (run_id TEXT PRIMARY KEY, kb_id TEXT NOT NULL, source_id TEXT NOT NULL,
        kind TEXT NOT NULL, status TEXT NOT NULL, started_at TEXT NOT NULL, finished_at TEXT, added INTEGER DEFAULT 0,
        updated INTEGER DEFAULT 0, unchanged INTEGER DEFAULT 0, deleted INTEGER DEFAULT 0, failed INTEGER DEFAULT 0,
        failures TEXT DEFAULT '[]', error TEXT, pid INTEGER NOT NULL, embedded INTEGER DEFAULT 0)""",
    "CREATE INDEX IF NOT EXISTS source_runs_by_source ON source_runs (kb_id, source_id, started_at)",
    """CREATE TABLE IF NOT EXISTS source_documents (kb_id TEXT NOT NULL, source_id TEXT NOT NULL,
        document_id TEXT NOT NULL, name TEXT NOT NULL, hash TEXT, status TEXT NOT NULL, reason TEXT,
        updated_at TEXT NOT NULL, PRIMARY KEY (kb_id, source_id, document_id))""",
    """CREATE TABLE IF NOT EXISTS citation_feedback (
        id TEXT PRIMARY KEY, tenant TEXT NOT NULL, kb_id TEXT NOT NULL, question TEXT NOT NULL, chunk_id TEXT NOT NULL,
        source TEXT, citation TEXT, vote TEXT NOT NULL, comment TEXT, user_id TEXT, created_on TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS notes (id TEXT PRIMARY KEY, agent_id TEXT NOT NULL, user_id TEXT,
        text TEXT NOT NULL, saved_at REAL NOT NULL)""",
    "CREATE TABLE IF NOT EXISTS embedding_cache (key TEXT PRIMARY KEY, vector BLOB NOT NULL)",
)

# Where PostgreSQL keeps the schema's version (SQLite: PRAGMA user_version)
VERSION_TABLE = "CREATE TABLE IF NOT EXISTS eddi_rag_schema (version INTEGER NOT NULL)"

# Columns added without a version before there were versions: (table, column, its definition).
UNVERSIONED_COLUMNS = (
    ("resources", "tenant", "TEXT NOT NULL DEFAULT 'default'"),
    ("ingestion_jobs", "format", "TEXT"),
    ("ingestion_jobs", "attempts", "INTEGER NOT NULL DEFAULT 0"),
)


def on_postgresql(url: str | None) -> TypeGuard[str]:
    """Whether a state URL names PostgreSQL (the state a fleet shares)."""
    return url is not None and url.startswith(("postgresql://", "postgres://"))


def open_state(url: str | None, data_dir: str | Path | None, file_name: str) -> StateDatabase:
    """The state database a URL names: ``postgresql://…`` (a fleet's shared state, ``state.postgres``), else the
    SQLite file ``file_name`` in ``data_dir`` (``sqlite:///path`` names another file; no data_dir: in memory)."""
    if on_postgresql(url):
        from eddi_rag.state.postgres import PostgresDatabase

        return PostgresDatabase(url)
    if url and url.startswith("sqlite:///"):
        return Database(url.removeprefix("sqlite:///") or ":memory:")
    if url:
        raise ValueError(f"state URL {url!r}: use postgresql://user:password@host:port/database or sqlite:///path/to/file.db")
    return Database(Path(data_dir) / file_name if data_dir is not None else ":memory:")


def _columns(c: Any, table: str) -> set[str]:
    return Database.columns(c, table) if isinstance(c, sqlite3.Connection) else c.columns(table)


def _baseline(c: sqlite3.Connection) -> None:
    """Version 1: every table; a database of a release before versions gets the columns it lacks."""
    for statement in TABLES:
        c.execute(statement)
    for table, column, definition in UNVERSIONED_COLUMNS:
        if column not in _columns(c, table):
            c.execute(f"ALTER TABLE {table} ADD COLUMN {column} {definition}")


def _appended_ingestions(c: sqlite3.Connection) -> None:
    """Version 2: an ingestion job's ``document_id`` (the id its chunks get; NULL: its ``document`` name,
    as every job before this version): REST ingestions append as EDDI's do, each under an id of its own."""
    c.execute("ALTER TABLE ingestion_jobs ADD COLUMN document_id TEXT")


def _eddi_sources(c: sqlite3.Connection) -> None:
    """Version 3: EDDI's sources. A document's ``missed`` complete runs (tombstoned after
    ``tombstoneAfterMissedRuns``); a run's ``seen`` documents, ``segments`` stored, ``stop_reason`` and ``cost``;
    the purge marker (``source_purges``: a purged source's chunks no run wrote since are swept once the marker
    was missed as often); the files of upload sources."""
    c.execute("ALTER TABLE source_documents ADD COLUMN missed INTEGER NOT NULL DEFAULT 0")
    for column in ("seen INTEGER DEFAULT 0", "segments INTEGER DEFAULT 0", "stop_reason TEXT", "cost REAL"):
        c.execute(f"ALTER TABLE source_runs ADD COLUMN {column}")
    c.execute("""CREATE TABLE source_purges (kb_id TEXT NOT NULL, source_id TEXT NOT NULL, purged_at TEXT NOT NULL,
        missed INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (kb_id, source_id))""")
    c.execute("""CREATE TABLE source_files (kb_id TEXT NOT NULL, source_id TEXT NOT NULL, file_id TEXT NOT NULL,
        name TEXT NOT NULL, content_type TEXT, size INTEGER NOT NULL, sha256 TEXT NOT NULL, data BLOB NOT NULL,
        uploaded_at TEXT NOT NULL, PRIMARY KEY (kb_id, source_id, file_id))""")


def _timeout_in_milliseconds(c: sqlite3.Connection) -> None:
    """Version 4: ``embeddingParameters.timeout`` is in milliseconds, as EDDI's; the knowledge bases saved with
    it in seconds keep their timeout as ``timeoutSeconds`` (every stored version, so history reads the same)."""
    rows = c.execute("SELECT kind, id, version, data FROM resource_versions WHERE kind='rags' AND data LIKE '%timeout%'").fetchall()
    for row in rows:
        data = json.loads(row["data"])
        params = data.get("embeddingParameters")
        if isinstance(params, dict) and "timeout" in params and "timeoutSeconds" not in params:
            params["timeoutSeconds"] = params.pop("timeout")
            c.execute("UPDATE resource_versions SET data=? WHERE kind=? AND id=? AND version=?",
                      (json.dumps(data), row["kind"], row["id"], row["version"]))


def _global_variables(c: sqlite3.Connection) -> None:
    """Version 5: EDDI's global variables (``${vars:key}``), per tenant."""
    c.execute("""CREATE TABLE global_variables (tenant TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL,
        description TEXT, exportable INTEGER NOT NULL DEFAULT 1, updated_at TEXT NOT NULL, PRIMARY KEY (tenant, key))""")


def _earlier_defaults_named(c: sqlite3.Connection) -> None:
    """Version 6: a new knowledge base defaults to Markdown chunks and hybrid search fused by RRF; every stored
    version that left them out keeps what it had (recursive, vector, weighted), named, so nothing changes under it."""
    from eddi_rag.config import EDDI_DEFAULTS

    for row in c.execute("SELECT kind, id, version, data FROM resource_versions WHERE kind='rags'").fetchall():
        data = json.loads(row["data"])
        if isinstance(data, dict) and any(k not in data for k in EDDI_DEFAULTS):
            c.execute("UPDATE resource_versions SET data=? WHERE kind=? AND id=? AND version=?",
                      (json.dumps({**EDDI_DEFAULTS, **data}), row["kind"], row["id"], row["version"]))


def _review_and_test_questions(c: sqlite3.Connection) -> None:
    """Version 7: a vote can be marked reviewed, with a note; a knowledge base keeps test questions, each with
    the passages it found when they were last accepted (its baseline)."""
    have = _columns(c, "citation_feedback")
    for column, definition in (("reviewed", "INTEGER NOT NULL DEFAULT 0"), ("note", "TEXT"), ("reviewed_on", "TEXT")):
        if column not in have:
            c.execute(f"ALTER TABLE citation_feedback ADD COLUMN {column} {definition}")
    c.execute("""CREATE TABLE IF NOT EXISTS test_questions (id TEXT PRIMARY KEY, tenant TEXT NOT NULL, kb_id TEXT NOT NULL,
        question TEXT NOT NULL, chunk_id TEXT, baseline TEXT NOT NULL, baseline_version INTEGER NOT NULL,
        created_on TEXT NOT NULL, accepted_on TEXT NOT NULL)""")
    c.execute("CREATE INDEX IF NOT EXISTS test_questions_by_kb ON test_questions (kb_id, created_on)")


def _leases(c: sqlite3.Connection) -> None:
    """Version 8: work shared by the processes of a fleet. An ingestion job is held by its ``owner`` until
    ``lease_until`` (renewed while it runs; a job whose worker died is taken again after it), waits until
    ``not_before`` (its store was down), and shows its ``progress`` to every replica; a source run is held
    the same way (``owner``, ``lease_until``; NULL in runs written before: their ``pid`` tells); the
    scheduler's last tick is kept where the next holder of the role finds it."""
    for table, columns in (("ingestion_jobs", ("owner", "lease_until", "not_before", "progress")),
                           ("source_runs", ("owner", "lease_until"))):
        have = _columns(c, table)
        for column in columns:
            if column not in have:
                c.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")
    c.execute("CREATE INDEX IF NOT EXISTS ingestion_jobs_by_status ON ingestion_jobs (status, created_on)")
    c.execute("CREATE TABLE IF NOT EXISTS fleet_ticks (name TEXT PRIMARY KEY, last TEXT NOT NULL)")


def _store_claims(c: sqlite3.Connection) -> None:
    """Version 9: who owns each physical store (stores.ownership): a table, collection or index by engine and
    name, the tenant and knowledge base holding it, how (created, adopted, claimed) and in which layout."""
    c.execute("""CREATE TABLE IF NOT EXISTS store_claims (engine TEXT NOT NULL, place TEXT NOT NULL, tenant TEXT NOT NULL,
        kb_id TEXT NOT NULL, how TEXT NOT NULL, layout TEXT NOT NULL, server TEXT, claimed_on TEXT NOT NULL,
        PRIMARY KEY (engine, place, kb_id))""")
    c.execute("CREATE INDEX IF NOT EXISTS store_claims_by_kb ON store_claims (kb_id)")


def _kept_files(c: sqlite3.Connection) -> None:
    """Version 10: the files of an EDDI export this product does not model (behaviour rules, outputs, dictionaries,
    property setters, snippets, schedules, …), byte for byte, by the resource they came with (its workflow or
    agent) and their path relative to it, so an export gives them back (verbs.eddi_export)."""
    c.execute("""CREATE TABLE IF NOT EXISTS kept_files (kind TEXT NOT NULL, id TEXT NOT NULL, path TEXT NOT NULL,
        body BLOB NOT NULL, PRIMARY KEY (kind, id, path))""")


def _job_warnings(c: sqlite3.Connection) -> None:
    """Version 11: what an ingestion that completed wants its author to check (pages OCR read with low confidence)."""
    if "warnings" not in _columns(c, "ingestion_jobs"):
        c.execute("ALTER TABLE ingestion_jobs ADD COLUMN warnings TEXT")


def _vault(c: sqlite3.Connection) -> None:
    """Version 12: EDDI's secrets vault (records.vault): each tenant's data key wrapped by the master key, each secret
    encrypted by its tenant's data key (never in plain text), and the per-deployment salt of the master key."""
    c.execute("CREATE TABLE IF NOT EXISTS vault_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)")
    c.execute("""CREATE TABLE IF NOT EXISTS vault_deks (tenant TEXT PRIMARY KEY, encrypted_dek TEXT NOT NULL, iv TEXT NOT NULL,
        created_on TEXT NOT NULL, rotated_on TEXT)""")
    c.execute("""CREATE TABLE IF NOT EXISTS vault_secrets (tenant TEXT NOT NULL, key_name TEXT NOT NULL, ciphertext TEXT NOT NULL,
        iv TEXT NOT NULL, checksum TEXT NOT NULL, description TEXT, allowed_agents TEXT NOT NULL, created_on TEXT NOT NULL,
        last_accessed_on TEXT, last_rotated_on TEXT, PRIMARY KEY (tenant, key_name))""")


def _job_failures(c: sqlite3.Connection) -> None:
    """Version 13: what fixes a failed ingestion (errors.FILE, DEPENDENCY or CONFIGURATION), kept with it."""
    if "failure" not in _columns(c, "ingestion_jobs"):
        c.execute("ALTER TABLE ingestion_jobs ADD COLUMN failure TEXT")


def _job_bodies(c: sqlite3.Connection) -> None:
    """Version 14: an ingestion's file in a table of its own (``ingestion_bodies``), out of the job's row, which is
    written at every claim, lease renewal and status: SQLite rewrites (and RETURNING reads back) a whole row at
    each update, so a 20 MB file there cost 20 MB of copies per write and kept a server's memory ~100 MB higher."""
    c.execute("CREATE TABLE IF NOT EXISTS ingestion_bodies (id TEXT PRIMARY KEY, body BLOB NOT NULL)")
    if "body" in _columns(c, "ingestion_jobs"):
        c.execute("INSERT INTO ingestion_bodies (id, body) SELECT id, body FROM ingestion_jobs WHERE body IS NOT NULL")
        c.execute("ALTER TABLE ingestion_jobs DROP COLUMN body")


def _run_messages(c: sqlite3.Connection) -> None:
    """Version 15: what a source run's listing said beside its counts (an unsigned S3 listing that found nothing)."""
    if "message" not in _columns(c, "source_runs"):
        c.execute("ALTER TABLE source_runs ADD COLUMN message TEXT")


def _canonical_places(c: sqlite3.Connection) -> None:
    """Version 16: store claims under the one spelling a place has now (stores.ownership.canonical): a pgvector table
    as PostgreSQL reads an unquoted name (lower case, without ``public.``), a Qdrant local folder by its real path,
    other collections and indexes in lower case. A claim whose new spelling another row of its KB holds already is
    left as it was (nothing is lost: it only no longer matches)."""
    plain = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}(?:\.[A-Za-z_][A-Za-z0-9_$]{0,62})?")
    for row in c.execute("SELECT engine, place, kb_id FROM store_claims").fetchall():
        engine, place = row[0], row[1]
        if engine == "pgvector":
            canonical = place.strip().lower().removeprefix("public.") if plain.fullmatch(place.strip()) else place
        else:
            folder, sep, collection = place.rpartition("#")
            canonical = f"{os.path.realpath(folder) if folder and folder != ':memory:' else folder}{sep}{collection.strip().lower()}"
        if canonical != place and not c.execute("SELECT 1 FROM store_claims WHERE engine=? AND place=? AND kb_id=?",
                                                (engine, canonical, row[2])).fetchall():
            c.execute("UPDATE store_claims SET place=? WHERE engine=? AND place=? AND kb_id=?", (canonical, engine, place, row[2]))


def _principals(c: sqlite3.Connection) -> None:
    """Version 17: who may read what (retrieval.access): an API key bound to a user carries that user's groups
    (``api_keys.groups``, a JSON list); the group directory (``group_members``) gives the groups of a user named by a
    caller acting for users, per tenant; the ACL of the document a queued ingestion writes (``ingestion_jobs.acl``); a
    knowledge base's per-user or per-group access (``kb_grants``: VIEW, EDIT)."""
    if "groups" not in _columns(c, "api_keys"):
        c.execute("ALTER TABLE api_keys ADD COLUMN groups TEXT NOT NULL DEFAULT '[]'")
    c.execute("""CREATE TABLE IF NOT EXISTS group_members (tenant TEXT NOT NULL, user_id TEXT NOT NULL, group_id TEXT NOT NULL,
        added_on TEXT NOT NULL, PRIMARY KEY (tenant, user_id, group_id))""")
    if "acl" not in _columns(c, "ingestion_jobs"):  # who may read the document a queued ingestion writes (JSON)
        c.execute("ALTER TABLE ingestion_jobs ADD COLUMN acl TEXT")
    c.execute("""CREATE TABLE IF NOT EXISTS kb_grants (tenant TEXT NOT NULL, kb_id TEXT NOT NULL, principal TEXT NOT NULL,
        access TEXT NOT NULL, granted_on TEXT NOT NULL, PRIMARY KEY (tenant, kb_id, principal))""")


def _source_cursors(c: sqlite3.Connection) -> None:
    """Version 18: where each source's next sync resumes (sources.base: a connector's change cursor), and the version
    token a source gave each document (``source_documents.version``: a digest of it, as ``hash`` is of the bytes)."""
    if "version" not in _columns(c, "source_documents"):
        c.execute("ALTER TABLE source_documents ADD COLUMN version TEXT")
    c.execute("""CREATE TABLE IF NOT EXISTS source_cursors (kb_id TEXT NOT NULL, source_id TEXT NOT NULL, cursor TEXT NOT NULL,
        updated_at TEXT NOT NULL, PRIMARY KEY (kb_id, source_id))""")


def _synced_permissions(c: sqlite3.Connection) -> None:
    """Version 19: who may read each document a source brought, as it was written to its chunks
    (``source_documents.acl``, JSON; NULL: the source's default), so a permission sync rewrites only what changed; and
    whose each group membership is (``group_members.origin``: '' the operator's, ``source:<kb>/<source>`` a source's
    permission sync, replaced at its next one)."""
    if "acl" not in _columns(c, "source_documents"):
        c.execute("ALTER TABLE source_documents ADD COLUMN acl TEXT")
    if "origin" not in _columns(c, "group_members"):
        c.execute("ALTER TABLE group_members ADD COLUMN origin TEXT NOT NULL DEFAULT ''")


def _questions_asked_as(c: sqlite3.Connection) -> None:
    """Version 20: the user a test question is asked as (``test_questions.as_user``; NULL: nobody, who reads nothing
    of a knowledge base that reads by permissions)."""
    if "as_user" not in _columns(c, "test_questions"):
        c.execute("ALTER TABLE test_questions ADD COLUMN as_user TEXT")


def _version_authors(c: sqlite3.Connection) -> None:
    """Version 21: who saved each version of a resource (``resource_versions.author``: ``user:<id>``, ``key <id>``, or
    NULL when nobody was asked: auth off, an import, a version saved before)."""
    if "author" not in _columns(c, "resource_versions"):
        c.execute("ALTER TABLE resource_versions ADD COLUMN author TEXT")


def _audit(c: sqlite3.Connection) -> None:
    """Version 22: the audit record (records.audit): one chain of entries, each holding the hash of the one before."""
    c.execute("""CREATE TABLE IF NOT EXISTS audit_entries (seq INTEGER PRIMARY KEY, at TEXT NOT NULL, tenant TEXT NOT NULL,
        action TEXT NOT NULL, face TEXT NOT NULL, who TEXT NOT NULL, subject TEXT, detail TEXT NOT NULL,
        previous TEXT NOT NULL, hash TEXT NOT NULL)""")
    c.execute("CREATE INDEX IF NOT EXISTS audit_by_tenant ON audit_entries (tenant, at)")


def _audit_erasable(c: sqlite3.Connection) -> None:
    """Version 23: what of an audit entry may be erased without breaking its chain (``audit_entries.erasable``: a query's
    text and the salt of its chained digest, JSON), and where pruning left the chain (``audit_checkpoints``)."""
    if "erasable" not in _columns(c, "audit_entries"):
        c.execute("ALTER TABLE audit_entries ADD COLUMN erasable TEXT")
    c.execute("CREATE TABLE IF NOT EXISTS audit_checkpoints (seq INTEGER PRIMARY KEY, hash TEXT NOT NULL, at TEXT NOT NULL)")


def _audit_indexed(c: sqlite3.Connection) -> None:
    """Version 24: an auditor's questions answered by the database: the caller's user and the reader of a retrieval
    (``audit_entries.who_user``, ``reader``), the documents a retrieval gave (``audit_documents``); an entry emptied by
    its tenant's retention (``audit_entries.pruned``: when; its links to the entries around it stay); a tenant's audit
    settings (``audit_settings``: days kept, how a query is kept; NULL: the server's default)."""
    columns = _columns(c, "audit_entries")
    for column in ("who_user", "reader", "pruned"):
        if column not in columns:
            c.execute(f"ALTER TABLE audit_entries ADD COLUMN {column} TEXT")
    c.execute("CREATE TABLE IF NOT EXISTS audit_documents (tenant TEXT NOT NULL, document TEXT NOT NULL, seq INTEGER NOT NULL, "
              "PRIMARY KEY (tenant, document, seq))")
    c.execute("CREATE INDEX IF NOT EXISTS audit_by_who ON audit_entries (tenant, who_user)")
    c.execute("CREATE INDEX IF NOT EXISTS audit_by_reader ON audit_entries (tenant, reader)")
    c.execute("CREATE TABLE IF NOT EXISTS audit_settings (tenant TEXT PRIMARY KEY, retention_days REAL, queries TEXT)")
    c.execute("DELETE FROM audit_documents")  # (filled again from the entries: a second run finds the same)
    for seq, tenant, who, detail in c.execute("SELECT seq, tenant, who, detail FROM audit_entries").fetchall():
        who, detail = json.loads(who), json.loads(detail)
        c.execute("UPDATE audit_entries SET who_user=?, reader=? WHERE seq=?", (who.get("user"), detail.get("reader"), seq))
        for document in {str(d.get("document")) for d in detail.get("documents", [])}:
            c.execute("INSERT INTO audit_documents VALUES (?,?,?)", (tenant, document, seq))


def _run_fixes(c: sqlite3.Connection) -> None:
    """Version 25: what fixes a source run that failed (``source_runs.fix``: its error's, in words; NULL: it did not
    say), shown by Health beside the error."""
    if "fix" not in _columns(c, "source_runs"):
        c.execute("ALTER TABLE source_runs ADD COLUMN fix TEXT")


MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_baseline, _appended_ingestions, _eddi_sources,
                                                                 _timeout_in_milliseconds, _global_variables,
                                                                 _earlier_defaults_named, _review_and_test_questions,
                                                                 _leases, _store_claims, _kept_files, _job_warnings,
                                                                 _vault, _job_failures, _job_bodies, _run_messages,
                                                                 _canonical_places, _principals, _source_cursors,
                                                                 _synced_permissions, _questions_asked_as, _version_authors,
                                                                 _audit, _audit_erasable, _audit_indexed, _run_fixes)
LATEST = len(MIGRATIONS)



class NewerDatabaseError(EddiRagError, RuntimeError):
    """The database was written by a newer release than this one (HTTP 503: the server cannot run on it)."""
    status = 503


def _version(db: StateDatabase, c: Any) -> int:
    if db.dialect == POSTGRESQL:
        c.execute(VERSION_TABLE)
    return db.schema_version(c)


def version(db: StateDatabase) -> int:
    with db.transaction() as c:
        return _version(db, c)


def migrate(db: StateDatabase) -> int:
    """Bring ``db`` up to ``LATEST`` (nothing to do the second time); returns its version."""
    if db.migrated:  # every component calls this: no write lock taken once it is done
        return LATEST
    with db.transaction() as c:  # (the database's lock: one migration at a time)
        if db.migrated:
            return LATEST
        current = _version(db, c)
        if current > LATEST:
            raise NewerDatabaseError(f"{db.path}: its schema is version {current}, written by a newer eddi-rag; "
                                     f"this release reads up to version {LATEST}: upgrade eddi-rag")
        for step in MIGRATIONS[current:]:
            step(c)
        if current < LATEST:
            db.set_schema_version(c, LATEST)
        db.migrated = True
    return LATEST
