"""What each source ingested, as langchain-core's ``RecordManager`` keeps it for ``index()``: per document its
content hash (equal for equal bytes chunked and embedded the same way), whether its last ingestion failed and
why, and how many complete runs in a row missed it; and a purge's marker. ``reconcile`` and ``classify`` decide,
over a listing and this record, what a run does: pure functions, shared by a run and its preview."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from eddi_rag.backends.factories import embedding_key
from eddi_rag.config import IngestionSource, RagConfiguration
from eddi_rag.sources.base import Item
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import StateDatabase

ADD, UPDATE, UNCHANGED = "add", "update", "unchanged"


def digest(config: RagConfiguration, source: IngestionSource, data: bytes, acl: list[str] | None = None) -> str:
    """Equal for equal bytes that would be chunked and embedded the same way, read by the same ``acl`` (a document
    whose readers changed is written again: its chunks keep their vectors)."""
    how = json.dumps([embedding_key(config), config.chunkStrategy, config.chunkSize, config.chunkOverlap,
                      source.settings.maxContentLength, *([acl] if acl is not None else [])])
    return hashlib.sha256(how.encode() + b"\0" + data).hexdigest()


def acl_json(acl: list[str] | None) -> str:
    """An ACL as the ledger keeps it: comparable as text."""
    return json.dumps(acl)


def classify(known: Any, digest: str) -> str:
    """What a listed document's bytes (as ``digest``) mean beside its record ``known`` (None: never ingested):
    ADD, UPDATE, or UNCHANGED (ingested fine with these very bytes)."""
    if known is None or known["hash"] is None:
        return ADD
    return UNCHANGED if known["status"] == "ok" and known["hash"] == digest else UPDATE


@dataclass
class Reconciled:
    missed: list[str]  # documents a complete run lacks, missed once more
    gone: list[str]  # of those, the ones missed ``tombstoneAfterMissedRuns`` times in a row: they leave


def reconcile(known: dict[str, Any], listed: set[str], tombstone_after: int) -> Reconciled:
    """After a complete listing ``listed``: which recorded documents it missed, and which of them are gone."""
    missed = sorted(d for d in known if d not in listed)
    return Reconciled([d for d in missed if known[d]["missed"] + 1 < tombstone_after],
                      [d for d in missed if known[d]["missed"] + 1 >= tombstone_after])


class SourceLedger:
    def __init__(self, db: StateDatabase):
        self.db = db

    def known(self, kb_id: str, source_id: str) -> dict[str, Any]:
        """The source's documents as recorded, by document id (rows: name, hash, status, reason, updated_at, missed)."""
        rows = self.db.query("SELECT * FROM source_documents WHERE kb_id=? AND source_id=?", (kb_id, source_id))
        return {r["document_id"]: r for r in rows}

    def record(self, kb_id: str, source_id: str, item: Item, digest: str | None, reason: str | None,
               version: str | None = None, acl: list[str] | None = None) -> None:
        """``item`` ingested (``reason`` None) or failed for ``reason``, with the hash of what is stored of it (and the
        digest of its version token, when its source gave one; and the ACL its chunks were written with)."""
        self.db.execute(
            "INSERT INTO source_documents (kb_id, source_id, document_id, name, hash, status, reason, updated_at, missed, "
            "version, acl) VALUES (?,?,?,?,?,?,?,?,0,?,?) ON CONFLICT(kb_id, source_id, document_id) "
            "DO UPDATE SET name=excluded.name, hash=excluded.hash, status=excluded.status, reason=excluded.reason, "
            "updated_at=excluded.updated_at, missed=0, version=excluded.version, acl=excluded.acl",
            (kb_id, source_id, item.document_id, item.name, digest, "failed" if reason else "ok", reason, fleet.now(),
             version, None if reason else acl_json(acl)))

    def set_acl(self, kb_id: str, source_id: str, document_id: str, acl: list[str] | None) -> None:
        """The document's chunks were rewritten with ``acl`` (and nothing else)."""
        self.db.execute("UPDATE source_documents SET acl=? WHERE kb_id=? AND source_id=? AND document_id=?",
                        (acl_json(acl), kb_id, source_id, document_id))

    def seen(self, kb_id: str, source_id: str, document_id: str) -> None:
        """Listed again, unchanged: no longer missed."""
        self.db.execute("UPDATE source_documents SET missed=0 WHERE kb_id=? AND source_id=? AND document_id=?",
                        (kb_id, source_id, document_id))

    def missed(self, kb_id: str, source_id: str, document_ids: list[str]) -> None:
        for document_id in document_ids:
            self.db.execute("UPDATE source_documents SET missed=missed+1 WHERE kb_id=? AND source_id=? AND document_id=?",
                            (kb_id, source_id, document_id))

    def forget(self, kb_id: str, source_id: str, document_id: str) -> None:
        self.db.execute("DELETE FROM source_documents WHERE kb_id=? AND source_id=? AND document_id=?",
                        (kb_id, source_id, document_id))

    def cursor(self, kb_id: str, source_id: str) -> str | None:
        """Where the source's next sync resumes (None: a full listing)."""
        rows = self.db.query("SELECT cursor FROM source_cursors WHERE kb_id=? AND source_id=?", (kb_id, source_id))
        return rows[0]["cursor"] if rows else None

    def advance(self, kb_id: str, source_id: str, cursor: str | None) -> None:
        """The next sync resumes from ``cursor`` (None: with a full listing); called once a run's work is recorded."""
        if cursor is None:
            self.reset_cursor(kb_id, source_id)
            return
        self.db.execute("INSERT INTO source_cursors (kb_id, source_id, cursor, updated_at) VALUES (?,?,?,?) "
                        "ON CONFLICT(kb_id, source_id) DO UPDATE SET cursor=excluded.cursor, updated_at=excluded.updated_at",
                        (kb_id, source_id, cursor, fleet.now()))

    def reset_cursor(self, kb_id: str, source_id: str) -> None:
        self.db.execute("DELETE FROM source_cursors WHERE kb_id=? AND source_id=?", (kb_id, source_id))

    def purged(self, kb_id: str, source_id: str) -> None:
        """Forget every document of the source, and mark the purge: complete runs miss it like a vanished document
        (the cursor goes too: the next run lists everything)."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM source_cursors WHERE kb_id=? AND source_id=?", (kb_id, source_id))
            conn.execute("DELETE FROM source_documents WHERE kb_id=? AND source_id=?", (kb_id, source_id))
            conn.execute("INSERT INTO source_purges (kb_id, source_id, purged_at, missed) VALUES (?,?,?,0) "
                         "ON CONFLICT(kb_id, source_id) DO UPDATE SET purged_at=excluded.purged_at, missed=0",
                         (kb_id, source_id, fleet.now()))

    def purge_missed(self, kb_id: str, source_id: str) -> int | None:
        """How many complete runs missed the purge marker so far (None: no purge waits to be swept)."""
        marker = self.db.query("SELECT missed FROM source_purges WHERE kb_id=? AND source_id=?", (kb_id, source_id))
        return marker[0]["missed"] if marker else None

    def purge_missed_once(self, kb_id: str, source_id: str) -> None:
        self.db.execute("UPDATE source_purges SET missed=missed+1 WHERE kb_id=? AND source_id=?", (kb_id, source_id))

    def purge_swept(self, kb_id: str, source_id: str) -> None:
        self.db.execute("DELETE FROM source_purges WHERE kb_id=? AND source_id=?", (kb_id, source_id))

    def forget_source(self, kb_id: str, source_id: str) -> None:
        """Everything recorded of the source, and its kept files; its run history stays."""
        with self.db.transaction() as conn:
            for table in ("source_documents", "source_purges", "source_files", "source_cursors"):
                conn.execute(f"DELETE FROM {table} WHERE kb_id=? AND source_id=?", (kb_id, source_id))
