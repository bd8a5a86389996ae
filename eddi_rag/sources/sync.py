"""Keep a knowledge base in sync with its sources (EDDI's ``sources[]``: web and upload; our folder and sitemap).

A run lists the source, then for each document: unchanged bytes (same content hash under the
same chunking and model) cost nothing; a new or changed document is ingested through the ingest
pipeline (atomic per document, re-embedding only chunks whose text changed; its text cut at
``settings.maxContentLength``) and counts as ingested only once its chunks are stored; a document that
fails keeps its reason (and its previous version, if any) and can be retried alone or with the others,
without listing the source again. A document missing from ``settings.tombstoneAfterMissedRuns`` complete
runs in a row leaves the knowledge base; a run that stopped at a limit (``maxPages``,
``maxSegmentsPerRun``, ``timeBudgetMinutes``) or could not read a page concludes nothing about what is
gone. One run per source at a time, across the processes sharing the state (a fleet's machines too): a run
is held under a lease its process renews (``fleet``); a run whose process died (its lease ran out, or it was
a process of this machine that is gone) is marked FAILED by the next one, which completes the work.

A purge forgets what the source ingested and keeps the chunks (no gap while the next run re-embeds, as
EDDI does); it leaves a marker that complete runs miss like a vanished document, and once it was missed
``tombstoneAfterMissedRuns`` times, the source's chunks no run wrote since the purge are removed.

Runs answer EDDI's IngestionRun (``runId, sourceId, status: RUNNING|COMPLETED|FAILED|CANCELLED, startedAt,
finishedAt, documentsSeen, documentsIngested, documentsUnchanged, documentsFailed, documentsTombstoned,
segmentsStored, costUsd, error``) and ours beside it (``added, updated, unchanged, deleted, failed,
failures: [{document, reason}], embedded, stopReason``), newest first.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from eddi_rag import state
from eddi_rag.backends.factories import embedding_key
from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.common.secrets import SecretResolver
from eddi_rag.config import IngestionSource, RagConfiguration
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.loaders import detect
from eddi_rag.ingest.pipeline import Ingestor
from eddi_rag.sources import Item, Listing, fetching, folder, git, s3, sitemap, upload, web
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import StateDatabase
from eddi_rag.verbs.configs import Configs
from eddi_rag.verbs.documents import Documents

log = logging.getLogger(__name__)

RUNNING, COMPLETED, FAILED, CANCELLED = "RUNNING", "COMPLETED", "FAILED", "CANCELLED"
PURGE = "purge"  # the claim a purge or a file delete takes; not listed among the runs


class SourceNotFoundError(EddiRagError, LookupError):
    status = 404


class SourceBusyError(EddiRagError, RuntimeError):
    """A run of this source is under way, or the source is disabled (HTTP 409, EDDI's ``{error, sourceId}``)."""
    status = 409

    def __init__(self, message: str, source_id: str):
        super().__init__(message)
        self.source_id = source_id

    def body(self) -> dict[str, Any]:
        return {**super().body(), "sourceId": self.source_id}


MAX_PREVIEWS = 3  # previews under way at once in this process (EDDI's bound)
MAX_RUNS_LISTED = 200  # a longer history is asked for in vain: it reads as this many


class TooManyPreviewsError(EddiRagError, RuntimeError):
    status = 429

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "10"}


class NotAnUploadSourceError(EddiRagError, ValueError):
    """Files sent to a source that does not hold files (HTTP 409, as EDDI answers)."""
    status = 409


_now = fleet.now


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
    seen: int = 0  # documents the listing found
    segments: int = 0  # chunks the ingested documents have
    stopReason: str | None = None  # the limit that stopped it
    costUsd: float | None = None
    sourceId: str | None = None

    def to_json(self) -> dict[str, Any]:
        ours = {k: v for k, v in asdict(self).items() if v is not None}
        return {**ours, "documentsSeen": self.seen, "documentsIngested": self.added + self.updated,
                "documentsUnchanged": self.unchanged, "documentsFailed": self.failed,
                "documentsTombstoned": self.deleted, "segmentsStored": self.segments}


class SourceSync:
    def __init__(self, db: StateDatabase, configs: Configs, ingestor: Ingestor, documents: Documents, outbound: OutboundPolicy,
                 redact: Callable[[str], str] = lambda s: s, resolver: SecretResolver | None = None):
        self.db, self.configs, self.ingestor, self.kb_documents, self.outbound, self.redact = \
            db, configs, ingestor, documents, outbound, redact
        self.resolver = resolver or SecretResolver()
        self.files = upload.Files(db)
        self._active: set[str] = set()  # runs under way in this process
        self._previews = threading.BoundedSemaphore(MAX_PREVIEWS)
        self.owner, self.lease = fleet.new_owner(), fleet.lease_seconds_from_env()
        self._renewing: threading.Thread | None = None
        self._renewing_lock = threading.Lock()
        state.migrate(db)

    def close(self) -> None:
        """A graceful shutdown: runs this process is carrying out read CANCELLED (as EDDI's), not left to be reaped."""
        for run_id in list(self._active):
            self.db.execute("UPDATE source_runs SET status=?, finished_at=?, error=? WHERE run_id=? AND status=?",
                            (CANCELLED, _now(), "the server shut down during the run", run_id, RUNNING))
        self._active.clear()
        fleet.ended(self.owner)

    def _interrupted(self, row: Any) -> bool:
        """Whether a RUNNING run's process ended before it finished: its lease ran out or its owner is known to
        have ended (a run of this process it is not carrying out, e.g. one of an earlier process that had the
        same pid, too); a run written before leases: its process is gone."""
        if row["run_id"] in self._active:
            return False
        if row["owner"] == self.owner:  # ours, and we do not carry it out
            return True
        if row["owner"]:
            return fleet.owner_ended(row["owner"]) or (row["lease_until"] or "") < fleet.now()
        return row["pid"] == os.getpid() or not fleet.alive(row["pid"])

    def _fail_interrupted(self, conn: Any, row: Any) -> None:
        conn.execute("UPDATE source_runs SET status=?, finished_at=?, error=? WHERE run_id=? AND status=?",
                     (FAILED, _now(), f"interrupted: its process ({row['owner'] or row['pid']}) ended before it finished",
                      row["run_id"], RUNNING))

    def _renew(self) -> None:
        """Renew the leases of the runs this process carries out, while there are any."""
        while True:
            with self._renewing_lock:
                if not self._active:
                    self._renewing = None
                    return
            for run_id in list(self._active):
                try:
                    self.db.execute("UPDATE source_runs SET lease_until=? WHERE run_id=? AND status=?",
                                    (fleet.now(self.lease), run_id, RUNNING))
                except Exception as e:  # noqa: BLE001 - out of reach now: the next renewal tries again
                    log.warning("source run lease not renewed: %s", e)
            time.sleep(min(5.0, self.lease / 3))

    # -- what is where ----------------------------------------------------------------------
    def source(self, kb_id: str, source_id: str) -> tuple[RagConfiguration, IngestionSource]:
        config = self.configs.get(kb_id)
        source = config.source(source_id)
        if source is None:
            known = ", ".join(s.effective_id for s in config.sources) or "none"
            raise SourceNotFoundError(f"knowledge base {kb_id!r} has no source {source_id!r} (its sources: {known})")
        return config, source

    def listing(self, kb_id: str, source: IngestionSource, deadline: float | None = None) -> Listing:
        sid, kind = source.effective_id, source.type
        if kind == "upload":
            return self.files.listing(kb_id, sid)
        if kind == "folder":
            assert source.folder is not None  # the schema: a source has the block of its type
            return folder.listing(sid, source.folder)
        if kind == "git":
            assert source.git is not None
            return git.listing(sid, source.git, git.working_copy(self.configs.data_dir, kb_id, sid, source.git.url), self.outbound)
        if kind == "s3":
            assert source.s3 is not None
            tenant = self.configs.resources.tenant_of("rags", kb_id)
            return s3.listing(sid, source.s3, lambda value: self.resolver.resolve(value, tenant), self.outbound)
        with self.outbound.client() as client:
            if kind == "web":
                assert source.web is not None
                return web.listing(sid, source.web, client, source.settings.maxBytesPerPage, deadline)
            assert source.sitemap is not None
            return sitemap.listing(sid, source.sitemap, client, self._fetch_url(source))  # pages are fetched later

    def _fetch_url(self, source: IngestionSource):
        def page(url: str):
            def fetch() -> tuple[bytes, str | None]:
                with self.outbound.client() as client:
                    return fetching.fetch(client, url, max_bytes=source.settings.maxBytesPerPage)
            return fetch
        return page

    def _item(self, kb_id: str, source: IngestionSource, document_id: str, name: str) -> Item:
        """A document of the source fetched alone (retries)."""
        if source.type == "folder":
            assert source.folder is not None
            return folder.item(source.effective_id, folder.check_folder(source.folder.path), name)
        if source.type in ("upload", "git", "s3"):  # listed again: the one document found in it
            listed = self.files.listing(kb_id, source.effective_id) if source.type == "upload" else self.listing(kb_id, source)
            return next((i for i in listed.items if i.document_id == document_id), Item(document_id, name, self._gone(name)))
        return Item(document_id, name, self._fetch_url(source)(document_id))

    @staticmethod
    def _gone(name: str):
        def fetch() -> tuple[bytes, str | None]:
            raise upload.FileNotFoundInSourceError(f"{name}: the file is no longer in the source")
        return fetch

    def _state(self, kb_id: str, source_id: str) -> dict[str, Any]:
        rows = self.db.query("SELECT * FROM source_documents WHERE kb_id=? AND source_id=?", (kb_id, source_id))
        return {r["document_id"]: r for r in rows}

    @staticmethod
    def _digest(config: RagConfiguration, source: IngestionSource, data: bytes) -> str:
        """Equal for equal bytes that would be chunked and embedded the same way."""
        how = json.dumps([embedding_key(config), config.chunkStrategy, config.chunkSize, config.chunkOverlap,
                          source.settings.maxContentLength])
        return hashlib.sha256(how.encode() + b"\0" + data).hexdigest()

    # -- runs -------------------------------------------------------------------------------
    def _begin(self, kb_id: str, source_id: str, kind: str) -> Run:
        run = Run(secrets.token_hex(12), RUNNING, _now(), kind=kind, sourceId=source_id)
        with self.db.transaction() as conn:
            for row in conn.execute("SELECT run_id, pid, kind, owner, lease_until FROM source_runs "
                                    "WHERE kb_id=? AND source_id=? AND status=?",
                                    (kb_id, source_id, RUNNING)).fetchall():
                if not self._interrupted(row):
                    what = "a purge or a file delete is under way" if row["kind"] == PURGE \
                        else f"it is already running (run {row['run_id']})"
                    raise SourceBusyError(f"source {source_id!r} of knowledge base {kb_id!r}: {what}; "
                                          f"one run per source at a time", source_id)
                self._fail_interrupted(conn, row)
            self._active.add(run.runId)
            conn.execute("INSERT INTO source_runs (run_id, kb_id, source_id, kind, status, started_at, pid, owner, lease_until) "
                         "VALUES (?,?,?,?,?,?,?,?,?)", (run.runId, kb_id, source_id, kind, RUNNING, run.startedAt, os.getpid(),
                                                        self.owner, fleet.now(self.lease)))
        with self._renewing_lock:
            if self._renewing is None:
                self._renewing = threading.Thread(target=self._renew, name="eddi-rag-run-leases", daemon=True)
                self._renewing.start()
        return run

    def _end_claim(self, run: Run) -> None:
        """A purge's or a file delete's claim ends without a trace in the run history."""
        self.db.execute("DELETE FROM source_runs WHERE run_id=?", (run.runId,))
        self._active.discard(run.runId)

    def _save(self, run: Run) -> None:
        self.db.execute(
            "UPDATE source_runs SET status=?, finished_at=?, added=?, updated=?, unchanged=?, deleted=?, failed=?, "
            "failures=?, error=?, embedded=?, seen=?, segments=?, stop_reason=?, cost=? WHERE run_id=?",
            (run.status, run.finishedAt, run.added, run.updated, run.unchanged, run.deleted, run.failed,
             json.dumps(run.failures), run.error, run.embedded, run.seen, run.segments, run.stopReason, run.costUsd,
             run.runId))

    def _record(self, kb_id: str, source_id: str, item: Item, digest: str | None, reason: str | None) -> None:
        self.db.execute(
            "INSERT INTO source_documents (kb_id, source_id, document_id, name, hash, status, reason, updated_at, missed) "
            "VALUES (?,?,?,?,?,?,?,?,0) ON CONFLICT(kb_id, source_id, document_id) "
            "DO UPDATE SET name=excluded.name, hash=excluded.hash, status=excluded.status, reason=excluded.reason, "
            "updated_at=excluded.updated_at, missed=0",
            (kb_id, source_id, item.document_id, item.name, digest, "failed" if reason else "ok", reason, _now()))

    def _runnable(self, kb_id: str, source_id: str) -> tuple[RagConfiguration, IngestionSource]:
        config, source = self.source(kb_id, source_id)
        if not source.enabled:
            raise SourceBusyError(f"source {source.effective_id!r} of knowledge base {kb_id!r} is disabled "
                                  f"(enabled: false); enable it to run it", source.effective_id)
        return config, source

    def start(self, kb_id: str, source_id: str) -> Run:
        """Begin a run and carry it out on a background thread; returns it RUNNING (409: busy or disabled)."""
        config, source = self._runnable(kb_id, source_id)
        if source.folder is not None:
            folder.check_folder(source.folder.path)  # a folder we may not read is a 400 now, not a FAILED run later
        run = self._begin(kb_id, source.effective_id, "run")
        threading.Thread(target=self._carry_out, args=(kb_id, config, source, run, None), daemon=True,
                         name=f"eddi-rag-source-{source.effective_id}").start()
        return run

    def run(self, kb_id: str, source_id: str) -> Run:
        """A whole run, synchronously (the CLI, the scheduler)."""
        config, source = self._runnable(kb_id, source_id)
        return self._carry_out(kb_id, config, source, self._begin(kb_id, source.effective_id, "run"), None)

    def retry(self, kb_id: str, source_id: str, document_id: str | None = None) -> Run:
        """Ingest again the failed documents (or the one named), without listing the source."""
        config, source = self._runnable(kb_id, source_id)
        sid = source.effective_id
        failed = [r for r in self._state(kb_id, sid).values() if r["status"] == "failed"
                  and (document_id is None or r["document_id"] == document_id)]
        if document_id is not None and not failed:
            raise SourceNotFoundError(f"source {sid!r} has no failed document {document_id!r}")
        items = [self._item(kb_id, source, r["document_id"], r["name"]) for r in failed]
        return self._carry_out(kb_id, config, source, self._begin(kb_id, sid, "retry"), items)

    def _carry_out(self, kb_id: str, config: RagConfiguration, source: IngestionSource, run: Run,
                   items: list[Item] | None) -> Run:
        sid, settings = source.effective_id, source.settings
        deadline = time.monotonic() + settings.timeBudgetMinutes * 60
        try:
            listed = Listing(items, complete=False) if items is not None else self.listing(kb_id, source, deadline)
            run.seen, run.stopReason = len(listed.items), listed.stopped
            known = self._state(kb_id, sid)
            for failure in listed.failures:
                run.failed += 1
                run.failures.append(failure)
            for item in listed.items:
                if time.monotonic() > deadline:
                    run.stopReason = f"timeBudgetMinutes ({settings.timeBudgetMinutes}) reached"
                elif run.embedded >= settings.maxSegmentsPerRun:
                    run.stopReason = f"maxSegmentsPerRun ({settings.maxSegmentsPerRun}) reached"
                if run.stopReason:
                    break  # what is left is neither ingested nor missing: nothing is concluded
                self._one(kb_id, config, source, item, known.get(item.document_id), run)
            if listed.complete and run.stopReason is None:
                self._reconcile(kb_id, config, source, {i.document_id for i in listed.items}, run)
            run.status = COMPLETED
        except Exception as e:  # noqa: BLE001 - the run's status says what went wrong
            log.warning("source %s of %s failed: %s", sid, kb_id, e)
            run.status, run.error = FAILED, self.redact(f"{type(e).__name__}: {e}")
        if settings.costPerThousandSegments is not None:
            run.costUsd = round(run.embedded / 1000 * settings.costPerThousandSegments, 6)
        run.finishedAt = _now()
        if run.runId not in self._active:  # cancelled by a shutdown meanwhile: that is what it reads
            return run
        self._save(run)
        self._active.discard(run.runId)
        return run

    def _reconcile(self, kb_id: str, config: RagConfiguration, source: IngestionSource, listed: set[str], run: Run) -> None:
        """After a complete run: count a miss for each known document the listing lacks, remove those missed
        ``tombstoneAfterMissedRuns`` times; the purge marker likewise, which sweeps what no run wrote since."""
        sid, limit = source.effective_id, source.settings.tombstoneAfterMissedRuns
        known = self._state(kb_id, sid)
        gone = []
        for document_id, row in known.items():
            if document_id in listed:
                continue
            if row["missed"] + 1 >= limit:
                gone.append(document_id)
            else:
                self.db.execute("UPDATE source_documents SET missed=missed+1 WHERE kb_id=? AND source_id=? AND document_id=?",
                                (kb_id, sid, document_id))
        run.deleted = self._remove(kb_id, config, sid, sorted(gone))
        marker = self.db.query("SELECT missed FROM source_purges WHERE kb_id=? AND source_id=?", (kb_id, sid))
        if not marker or run.failed:  # a document not read may still have only its old chunks
            return
        if marker[0]["missed"] + 1 < limit:
            self.db.execute("UPDATE source_purges SET missed=missed+1 WHERE kb_id=? AND source_id=?", (kb_id, sid))
            return
        kept = sorted(set(known) - set(gone))
        where: dict[str, Any] = {"sourceId": sid}
        if kept:
            where["document_id"] = {"$nin": kept}
        self.kb_documents.delete_where(kb_id, where, config)
        self.db.execute("DELETE FROM source_purges WHERE kb_id=? AND source_id=?", (kb_id, sid))

    def _one(self, kb_id: str, config: RagConfiguration, source: IngestionSource, item: Item, known: Any, run: Run) -> None:
        sid = source.effective_id
        try:
            data, content_type = item.fetch()
            digest = self._digest(config, source, data)
            if known is not None and known["status"] == "ok" and known["hash"] == digest:
                run.unchanged += 1
                self.db.execute("UPDATE source_documents SET missed=0 WHERE kb_id=? AND source_id=? AND document_id=?",
                                (kb_id, sid, item.document_id))
                return
            fmt = detect(data, content_type, item.name)
            report = self.ingestor.ingest_file(kb_id, config, item.document_id, data, fmt, source=item.name,
                                               metadata={"sourceId": sid}, max_chars=source.settings.maxContentLength)
        except Exception as e:  # noqa: BLE001 - one document's failure is recorded, the run goes on
            reason = self.redact(str(e) or type(e).__name__)
            # the hash of the version still stored (None: nothing stored yet) stays, marked failed
            self._record(kb_id, sid, item, known["hash"] if known is not None else None, reason)
            run.failed += 1
            run.failures.append({"document": item.document_id, "reason": reason})
            return
        self._record(kb_id, sid, item, digest, None)  # only now: its chunks are stored
        run.embedded += report.embedded
        run.segments += report.chunks
        if known is None or known["hash"] is None:
            run.added += 1
        else:
            run.updated += 1

    # -- what a run would do, history, purge, files ------------------------------------------
    def preview(self, kb_id: str, source_id: str) -> dict[str, Any]:
        """What a run would do now, embedding nothing and writing nothing: EDDI's IngestionReport
        (``documentsSeen``, ``documentsIngested`` ...) and the documents behind each number (``add``,
        ``update``, ``unchanged``, ``delete``: documents a complete run would count as missed once more
        and remove when that is their ``tombstoneAfterMissedRuns``-th). At most MAX_PREVIEWS at once (429)."""
        if not self._previews.acquire(blocking=False):
            raise TooManyPreviewsError(f"{MAX_PREVIEWS} previews are under way; try again shortly")
        try:
            return self._preview(kb_id, source_id)
        finally:
            self._previews.release()

    def _preview(self, kb_id: str, source_id: str) -> dict[str, Any]:
        config, source = self.source(kb_id, source_id)
        sid = source.effective_id
        listed = self.listing(kb_id, source, time.monotonic() + 120)
        known = self._state(kb_id, sid)
        plan: dict[str, Any] = {"add": [], "update": [], "unchanged": [], "delete": [], "failures": list(listed.failures),
                                "complete": listed.complete, "notes": listed.notes}
        for item in listed.items:
            try:
                data, _ = item.fetch()
            except Exception as e:  # noqa: BLE001
                plan["failures"].append({"document": item.document_id, "reason": str(e) or type(e).__name__})
                continue
            row = known.get(item.document_id)
            if row is None:
                plan["add"].append(item.document_id)
            elif row["status"] == "ok" and row["hash"] == self._digest(config, source, data):
                plan["unchanged"].append(item.document_id)
            else:
                plan["update"].append(item.document_id)
        if listed.complete:
            limit, seen = source.settings.tombstoneAfterMissedRuns, {i.document_id for i in listed.items}
            plan["delete"] = sorted(d for d, r in known.items() if d not in seen and r["missed"] + 1 >= limit)
        return {"runId": None, "sourceId": sid, "outcome": "PREVIEW", "documentsSeen": len(listed.items),
                "documentsIngested": len(plan["add"]) + len(plan["update"]), "documentsUnchanged": len(plan["unchanged"]),
                "documentsSkipped": 0, "documentsFailed": len(plan["failures"]), "documentsTombstoned": len(plan["delete"]),
                "segmentsStored": 0, "costUsd": None, "replaceUnsupported": False, "tombstoningSkipped": not listed.complete,
                "stopReason": next(iter(listed.notes), None), "message": "; ".join(listed.notes) or None, **plan}

    def runs(self, kb_id: str, source_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """The run history, newest first: ``limit`` runs, at most MAX_RUNS_LISTED."""
        limit = max(1, min(limit, MAX_RUNS_LISTED))
        _, source = self.source(kb_id, source_id)
        query = ("SELECT * FROM source_runs WHERE kb_id=? AND source_id=? AND kind<>? ORDER BY started_at DESC LIMIT ?",
                 (kb_id, source.effective_id, PURGE, limit))
        rows = self.db.query(*query)
        stale = [r for r in rows if r["status"] == RUNNING and self._interrupted(r)]
        if stale:  # a run whose process died reads as what it is
            with self.db.transaction() as conn:
                for r in stale:
                    self._fail_interrupted(conn, r)
            rows = self.db.query(*query)
        return [Run(r["run_id"], r["status"], r["started_at"], r["finished_at"], r["added"], r["updated"],
                    r["unchanged"], r["deleted"], r["failed"], json.loads(r["failures"] or "[]"), r["error"],
                    r["kind"], r["embedded"], r["seen"] or 0, r["segments"] or 0, r["stop_reason"], r["cost"],
                    source.effective_id).to_json() for r in rows]

    def documents(self, kb_id: str, source_id: str) -> list[dict[str, Any]]:
        _, source = self.source(kb_id, source_id)
        return [{"documentId": r["document_id"], "name": r["name"], "status": r["status"], "reason": r["reason"],
                 "updatedAt": r["updated_at"], "missedRuns": r["missed"]} for r in self._state(kb_id, source.effective_id).values()]

    def purge(self, kb_id: str, source_id: str) -> dict[str, Any]:
        """Forget what the source ingested, keeping its chunks (EDDI's purge): the next run ingests everything
        it finds again; what it no longer finds is swept after ``tombstoneAfterMissedRuns`` complete runs.
        409 while a run holds the source."""
        _, source = self.source(kb_id, source_id)
        sid = source.effective_id
        claim = self._begin(kb_id, sid, PURGE)
        try:
            with self.db.transaction() as conn:
                conn.execute("DELETE FROM source_documents WHERE kb_id=? AND source_id=?", (kb_id, sid))
                conn.execute("INSERT INTO source_purges (kb_id, source_id, purged_at, missed) VALUES (?,?,?,0) "
                             "ON CONFLICT(kb_id, source_id) DO UPDATE SET purged_at=excluded.purged_at, missed=0",
                             (kb_id, sid, _now()))
        finally:
            self._end_claim(claim)
        return {"status": "purged", "sourceId": sid}

    def remove_documents(self, kb_id: str, source_id: str) -> int:
        """Take every document of the source out of the knowledge base and forget them; returns how many
        (our older purge, kept for the CLI and for a source removed from the configuration)."""
        config, source = self.source(kb_id, source_id)
        sid = source.effective_id
        return self._remove(kb_id, config, sid, list(self._state(kb_id, sid)))

    def forget_source(self, kb_id: str, config: RagConfiguration, source_id: str, chunks: bool = True) -> None:
        """A source removed from the configuration (or given another type): its chunks leave the knowledge base
        (``chunks``; with ``config``, the configuration it had), its state and files are forgotten; its run history stays."""
        if chunks:
            self.kb_documents.delete_where(kb_id, {"sourceId": source_id}, config)
        with self.db.transaction() as conn:
            for table in ("source_documents", "source_purges", "source_files"):
                conn.execute(f"DELETE FROM {table} WHERE kb_id=? AND source_id=?", (kb_id, source_id))

    def upload_source(self, kb_id: str, source_id: str) -> tuple[RagConfiguration, IngestionSource]:
        config, source = self.source(kb_id, source_id)
        if source.type != "upload":
            raise NotAnUploadSourceError(f"source {source.effective_id!r} of knowledge base {kb_id!r} is of type "
                                         f"{source.type!r}; files go to a source of type 'upload'")
        return config, source

    def list_files(self, kb_id: str, source_id: str) -> list[dict[str, Any]]:
        """The files an upload source holds, each with its state: Indexed, Changed (uploaded again since) or Not indexed."""
        _, source = self.upload_source(kb_id, source_id)
        sid = source.effective_id
        known = self._state(kb_id, sid)
        out = []
        for f in self.files.list(kb_id, sid):
            document_id = upload.document_id(sid, f["fileName"])
            row = known.get(document_id)
            status = "Not indexed" if row is None or row["status"] != "ok" else \
                "Changed" if f["uploadedAt"] > row["updated_at"] else "Indexed"  # uploaded again since it was ingested
            out.append({**f, "documentId": document_id, "status": status})
        return out

    def store_files(self, kb_id: str, source_id: str, files: list[tuple[str, bytes, str | None]]) -> dict[str, Any]:
        """Keep each file that is within the source's limits and yields text: EDDI's ``{stored, rejected:
        [{fileName, reason}]}``; running the source ingests them."""
        config, source = self.upload_source(kb_id, source_id)
        stored: list[dict[str, Any]] = []
        rejected: list[dict[str, str]] = []
        for name, data, content_type in files:
            try:
                if len(data) > source.upload.maxFileBytes:  # before parsing anything
                    raise upload.FileRefusedError(f"{len(data):,} bytes, more than upload.maxFileBytes "
                                                  f"({source.upload.maxFileBytes:,})")
                self.ingestor.readable(config, upload.clean_name(name), data, content_type)
                stored.append(self.files.store(kb_id, source.effective_id, source.upload, name, data, content_type))
            except Exception as e:  # noqa: BLE001 - each file is accepted or refused on its own
                if not isinstance(e, (EddiRagError, ValueError)):
                    log.warning("upload of %s refused: %s", name, e)
                rejected.append({"fileName": upload.clean_name(name), "reason": self.redact(str(e) or type(e).__name__)})
        return {"stored": stored, "rejected": rejected}

    def delete_file(self, kb_id: str, source_id: str, file_id: str) -> dict[str, Any]:
        """Remove a file and its chunks now (its chunks first: a store that fails keeps the file, to try again)."""
        config, source = self.upload_source(kb_id, source_id)
        sid = source.effective_id
        f = self.files.get(kb_id, sid, file_id)
        claim = self._begin(kb_id, sid, PURGE)
        try:
            self._remove(kb_id, config, sid, [upload.document_id(sid, f["fileName"])])
            self.files.delete(kb_id, sid, file_id)
        finally:
            self._end_claim(claim)
        return {"status": "deleted", "fileId": file_id, "fileName": f["fileName"], "sourceId": sid}

    def _remove(self, kb_id: str, config: RagConfiguration, source_id: str, document_ids: list[str]) -> int:
        """Take documents of the source out of the knowledge base and forget them; returns how many."""
        for document_id in document_ids:
            self.kb_documents.delete_where(kb_id, {"document_id": document_id}, config)
            self.db.execute("DELETE FROM source_documents WHERE kb_id=? AND source_id=? AND document_id=?",
                            (kb_id, source_id, document_id))
        return len(document_ids)
