"""Keep a knowledge base in sync with its sources.

A run lists the source, then for each document: unchanged bytes (same content hash under the
same chunking and model) cost nothing; a new or changed document is ingested through the ingest
pipeline (atomic per document, re-embedding only chunks whose text changed) and counts as
ingested only once its chunks are stored; a document that fails keeps its reason (and its
previous version, if any) and can be retried alone or with the others, without listing the
source again. When the listing is complete, documents the source no longer has leave the
knowledge base. One run per source at a time, across processes: a run whose process died is
marked FAILED by the next one, which completes the work.

Runs: ``{runId, status: RUNNING|COMPLETED|FAILED, startedAt, finishedAt, added, updated,
unchanged, deleted, failed, failures: [{document, reason}]}``, newest first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.config import IngestionSource, RagConfiguration
from eddi_rag.db import Database
from eddi_rag.errors import EddiRagError
from eddi_rag.factories import embedding_key
from eddi_rag.ingest.loaders import detect
from eddi_rag.ingest.pipeline import Ingestor
from eddi_rag.outbound import OutboundPolicy
from eddi_rag.sources import Item, Listing, folder, sitemap, web
from eddi_rag.verbs.configs import Configs
from eddi_rag.verbs.documents import Documents

log = logging.getLogger(__name__)

RUNNING, COMPLETED, FAILED = "RUNNING", "COMPLETED", "FAILED"


class SourceNotFoundError(EddiRagError, LookupError):
    status = 404


class SourceBusyError(EddiRagError, RuntimeError):
    """A run of this source is under way (HTTP 409)."""
    status = 409


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class Run:
    runId: str
    status: str
    startedAt: str
    finishedAt: str | None = None
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)
    error: str | None = None
    kind: str = "run"
    embedded: int = 0  # chunks sent to the embedding model (unchanged text reuses its vectors)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class SourceSync:
    def __init__(self, db: Database, configs: Configs, ingestor: Ingestor, documents: Documents, outbound: OutboundPolicy,
                 redact: Callable[[str], str] = lambda s: s):
        self.db, self.configs, self.ingestor, self.kb_documents, self.outbound, self.redact = \
            db, configs, ingestor, documents, outbound, redact
        self._active: set[str] = set()  # runs under way in this process
        state.migrate(db)

    def _interrupted(self, row: Any) -> bool:
        """Whether a RUNNING run's process ended before it finished (this process: a run it is not
        carrying out, e.g. one of an earlier process that had the same pid)."""
        if row["pid"] == os.getpid():
            return row["run_id"] not in self._active
        return not _alive(row["pid"])

    def _fail_interrupted(self, conn: Any, row: Any) -> None:
        conn.execute("UPDATE source_runs SET status=?, finished_at=?, error=? WHERE run_id=? AND status=?",
                     (FAILED, _now(), f"interrupted: its process ({row['pid']}) ended before it finished", row["run_id"],
                      RUNNING))

    # -- what is where ----------------------------------------------------------------------
    def source(self, kb_id: str, source_id: str) -> tuple[RagConfiguration, IngestionSource]:
        config = self.configs.get(kb_id)
        source = config.source(source_id)
        if source is None:
            known = ", ".join(s.effective_id for s in config.sources) or "none"
            raise SourceNotFoundError(f"knowledge base {kb_id!r} has no source {source_id!r} (its sources: {known})")
        return config, source

    def listing(self, source: IngestionSource) -> Listing:
        sid = source.effective_id
        if source.folder is not None:
            return folder.listing(sid, source.folder)
        with self.outbound.client() as client:
            if source.web is not None:
                return web.listing(sid, source.web, client)
            assert source.sitemap is not None  # a source is exactly one of folder, web, sitemap (schema)
            return sitemap.listing(sid, source.sitemap, client, self._fetch_url)  # pages are fetched later

    def _fetch_url(self, url: str):
        def fetch() -> tuple[bytes, str | None]:
            with self.outbound.client() as client:
                return web.fetch(client, url)
        return fetch

    def _item(self, source: IngestionSource, document_id: str, name: str) -> Item:
        """A document of the source fetched alone (retries)."""
        if source.folder is not None:
            return folder.item(source.effective_id, folder.check_folder(source.folder.path), name)
        return Item(document_id, name, self._fetch_url(document_id))

    def _state(self, kb_id: str, source_id: str) -> dict[str, Any]:
        rows = self.db.query("SELECT * FROM source_documents WHERE kb_id=? AND source_id=?", (kb_id, source_id))
        return {r["document_id"]: r for r in rows}

    @staticmethod
    def _digest(config: RagConfiguration, data: bytes) -> str:
        """Equal for equal bytes that would be chunked and embedded the same way."""
        how = json.dumps([embedding_key(config), config.chunkStrategy, config.chunkSize, config.chunkOverlap])
        return hashlib.sha256(how.encode() + b"\0" + data).hexdigest()

    # -- runs -------------------------------------------------------------------------------
    def _begin(self, kb_id: str, source_id: str, kind: str) -> Run:
        run = Run(secrets.token_hex(12), RUNNING, _now(), kind=kind)
        with self.db.transaction() as conn:
            for row in conn.execute("SELECT run_id, pid FROM source_runs WHERE kb_id=? AND source_id=? AND status=?",
                                    (kb_id, source_id, RUNNING)).fetchall():
                if not self._interrupted(row):
                    raise SourceBusyError(f"source {source_id!r} of knowledge base {kb_id!r} is already running "
                                          f"(run {row['run_id']}); one run per source at a time")
                self._fail_interrupted(conn, row)
            self._active.add(run.runId)
            conn.execute("INSERT INTO source_runs (run_id, kb_id, source_id, kind, status, started_at, pid) "
                         "VALUES (?,?,?,?,?,?,?)", (run.runId, kb_id, source_id, kind, RUNNING, run.startedAt, os.getpid()))
        return run

    def _save(self, run: Run) -> None:
        self.db.execute(
            "UPDATE source_runs SET status=?, finished_at=?, added=?, updated=?, unchanged=?, deleted=?, failed=?, "
            "failures=?, error=?, embedded=? WHERE run_id=?",
            (run.status, run.finishedAt, run.added, run.updated, run.unchanged, run.deleted, run.failed,
             json.dumps(run.failures), run.error, run.embedded, run.runId))

    def _record(self, kb_id: str, source_id: str, item: Item, digest: str | None, reason: str | None) -> None:
        self.db.execute(
            "INSERT INTO source_documents VALUES (?,?,?,?,?,?,?,?) ON CONFLICT(kb_id, source_id, document_id) "
            "DO UPDATE SET name=excluded.name, hash=excluded.hash, status=excluded.status, reason=excluded.reason, "
            "updated_at=excluded.updated_at",
            (kb_id, source_id, item.document_id, item.name, digest, "failed" if reason else "ok", reason, _now()))

    def start(self, kb_id: str, source_id: str) -> Run:
        """Begin a run and carry it out on a background thread; returns it RUNNING."""
        config, source = self.source(kb_id, source_id)
        run = self._begin(kb_id, source.effective_id, "run")
        threading.Thread(target=self._carry_out, args=(kb_id, config, source, run, None), daemon=True,
                         name=f"eddi-rag-source-{source.effective_id}").start()
        return run

    def run(self, kb_id: str, source_id: str) -> Run:
        """A whole run, synchronously (the CLI, the scheduler)."""
        config, source = self.source(kb_id, source_id)
        return self._carry_out(kb_id, config, source, self._begin(kb_id, source.effective_id, "run"), None)

    def retry(self, kb_id: str, source_id: str, document_id: str | None = None) -> Run:
        """Ingest again the failed documents (or the one named), without listing the source."""
        config, source = self.source(kb_id, source_id)
        sid = source.effective_id
        failed = [r for r in self._state(kb_id, sid).values() if r["status"] == "failed"
                  and (document_id is None or r["document_id"] == document_id)]
        if document_id is not None and not failed:
            raise SourceNotFoundError(f"source {sid!r} has no failed document {document_id!r}")
        items = [self._item(source, r["document_id"], r["name"]) for r in failed]
        return self._carry_out(kb_id, config, source, self._begin(kb_id, sid, "retry"), items)

    def _carry_out(self, kb_id: str, config: RagConfiguration, source: IngestionSource, run: Run,
                   items: list[Item] | None) -> Run:
        sid = source.effective_id
        try:
            listed = Listing(items, complete=False) if items is not None else self.listing(source)
            state = self._state(kb_id, sid)
            for failure in listed.failures:
                run.failed += 1
                run.failures.append(failure)
            for item in listed.items:
                self._one(kb_id, config, sid, item, state.get(item.document_id), run)
            if listed.complete:
                run.deleted = self._remove(kb_id, config, sid, sorted(set(state) - {i.document_id for i in listed.items}))
            run.status = COMPLETED
        except Exception as e:  # noqa: BLE001 - the run's status says what went wrong
            log.warning("source %s of %s failed: %s", sid, kb_id, e)
            run.status, run.error = FAILED, self.redact(f"{type(e).__name__}: {e}")
        run.finishedAt = _now()
        self._save(run)
        self._active.discard(run.runId)
        return run

    def _one(self, kb_id: str, config: RagConfiguration, sid: str, item: Item, known: Any, run: Run) -> None:
        try:
            data, content_type = item.fetch()
            digest = self._digest(config, data)
            if known is not None and known["status"] == "ok" and known["hash"] == digest:
                run.unchanged += 1
                return
            fmt = detect(data, content_type, item.name)
            report = self.ingestor.ingest_file(kb_id, config, item.document_id, data, fmt, source=item.name,
                                                  metadata={"sourceId": sid})
        except Exception as e:  # noqa: BLE001 - one document's failure is recorded, the run goes on
            reason = self.redact(str(e) or type(e).__name__)
            # the hash of the version still stored (None: nothing stored yet) stays, marked failed
            self._record(kb_id, sid, item, known["hash"] if known is not None else None, reason)
            run.failed += 1
            run.failures.append({"document": item.document_id, "reason": reason})
            return
        self._record(kb_id, sid, item, digest, None)  # only now: its chunks are stored
        run.embedded += report.embedded
        if known is None or known["hash"] is None:
            run.added += 1
        else:
            run.updated += 1

    # -- what a run would do, history, purge ---------------------------------------------------
    def preview(self, kb_id: str, source_id: str) -> dict[str, Any]:
        """What a run would do now, embedding nothing and writing nothing."""
        config, source = self.source(kb_id, source_id)
        listed = self.listing(source)
        state = self._state(kb_id, source.effective_id)
        plan: dict[str, Any] = {"add": [], "update": [], "unchanged": [], "delete": [], "failures": list(listed.failures),
                                "complete": listed.complete, "notes": listed.notes}
        for item in listed.items:
            try:
                data, _ = item.fetch()
            except Exception as e:  # noqa: BLE001
                plan["failures"].append({"document": item.document_id, "reason": str(e) or type(e).__name__})
                continue
            known = state.get(item.document_id)
            if known is None:
                plan["add"].append(item.document_id)
            elif known["status"] == "ok" and known["hash"] == self._digest(config, data):
                plan["unchanged"].append(item.document_id)
            else:
                plan["update"].append(item.document_id)
        if listed.complete:
            plan["delete"] = sorted(set(state) - {i.document_id for i in listed.items})
        return plan

    def runs(self, kb_id: str, source_id: str, limit: int = 50) -> list[dict[str, Any]]:
        _, source = self.source(kb_id, source_id)
        query = ("SELECT * FROM source_runs WHERE kb_id=? AND source_id=? ORDER BY started_at DESC LIMIT ?",
                 (kb_id, source.effective_id, limit))
        rows = self.db.query(*query)
        stale = [r for r in rows if r["status"] == RUNNING and self._interrupted(r)]
        if stale:  # a run whose process died reads as what it is
            with self.db.transaction() as conn:
                for r in stale:
                    self._fail_interrupted(conn, r)
            rows = self.db.query(*query)
        return [Run(r["run_id"], r["status"], r["started_at"], r["finished_at"], r["added"], r["updated"],
                    r["unchanged"], r["deleted"], r["failed"], json.loads(r["failures"] or "[]"), r["error"],
                    r["kind"], r["embedded"]).to_json() for r in rows]

    def documents(self, kb_id: str, source_id: str) -> list[dict[str, Any]]:
        _, source = self.source(kb_id, source_id)
        return [{"documentId": r["document_id"], "name": r["name"], "status": r["status"], "reason": r["reason"],
                 "updatedAt": r["updated_at"]} for r in self._state(kb_id, source.effective_id).values()]

    def purge(self, kb_id: str, source_id: str) -> int:
        """Remove every document of the source from the knowledge base; returns how many."""
        config, source = self.source(kb_id, source_id)
        sid = source.effective_id
        return self._remove(kb_id, config, sid, list(self._state(kb_id, sid)))

    def _remove(self, kb_id: str, config: RagConfiguration, source_id: str, document_ids: list[str]) -> int:
        """Take documents of the source out of the knowledge base and forget them; returns how many."""
        for document_id in document_ids:
            self.kb_documents.delete_where(kb_id, {"document_id": document_id}, config)
            self.db.execute("DELETE FROM source_documents WHERE kb_id=? AND source_id=? AND document_id=?",
                            (kb_id, source_id, document_id))
        return len(document_ids)
