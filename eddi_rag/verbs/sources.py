"""Keep a knowledge base in sync with its sources (EDDI's ``sources[]``: web and upload; our folder and sitemap).

A run lists the source, then for each document: unchanged bytes (same content hash under the
same chunking and model) cost nothing; a new or changed document is ingested through the ingest
pipeline (atomic per document, re-embedding only chunks whose text changed; its text cut at
``settings.maxContentLength``) and counts as ingested only once its chunks are stored; a document that
fails keeps its reason (and its previous version, if any) and can be retried alone or with the others,
without listing the source again. A document missing from ``settings.tombstoneAfterMissedRuns`` complete
runs in a row leaves the knowledge base; a run that stopped at a limit (``maxPages``,
``maxSegmentsPerRun``, ``timeBudgetMinutes``) or could not read a page concludes nothing about what is
gone. One run per source at a time, across the processes sharing the state (``sources.runs``: a run is held
under a lease, and one whose process died is marked FAILED by the next one, which completes the work); what
each source ingested, and what a listing means beside it, is ``sources.ledger``.

A purge forgets what the source ingested and keeps the chunks (no gap while the next run re-embeds, as
EDDI does); it leaves a marker that complete runs miss like a vanished document, and once it was missed
``tombstoneAfterMissedRuns`` times, the source's chunks no run wrote since the purge are removed.

The files an upload source holds are ``sources.files``; this module runs, previews, retries and purges.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from eddi_rag import state
from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.common.secrets import SecretNotFoundError, SecretResolver
from eddi_rag.config import ConfigValidationError, IngestionSource, RagConfiguration
from eddi_rag.errors import EddiRagError, described, fix_of
from eddi_rag.ingest.limits import max_upload_bytes
from eddi_rag.ingest.loaders import detect
from eddi_rag.ingest.pipeline import Ingestor
from eddi_rag.ingest.progress import Silent
from eddi_rag.records.groups import GroupDirectory
from eddi_rag.resource_types import ResourceNotFoundError
from eddi_rag.sources import files as upload
from eddi_rag.sources.base import CursorExpiredError, Item, Listing, PermissionSource, SourceContext, SyncEnd, feed, keeps_permissions
from eddi_rag.sources.connectors import connector, secret_fields
from eddi_rag.sources.ledger import ADD, UNCHANGED, SourceLedger, acl_json, classify, digest, reconcile
from eddi_rag.sources.runs import COMPLETED, FAILED, PERMISSIONS, PURGE, RUNNING, Run, SourceBusyError, SourceRuns
from eddi_rag.state import fleet
from eddi_rag.state.sqlite import StateDatabase
from eddi_rag.stores.filters import Node
from eddi_rag.verbs.documents import AclNotKeptError, Documents
from eddi_rag.verbs.knowledge_bases import KnowledgeBases

log = logging.getLogger(__name__)

class SourceNotFoundError(EddiRagError, LookupError):
    status = 404


MAX_PREVIEWS = 3  # previews under way at once in this process (EDDI's bound)


class NoPermissionsError(EddiRagError, ValueError):
    status = 400


class TooManyPreviewsError(EddiRagError, RuntimeError):
    status = 429

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "10"}


class SourceSync:
    def __init__(self, db: StateDatabase, kbs: KnowledgeBases, ingestor: Ingestor, documents: Documents, outbound: OutboundPolicy,
                 redact: Callable[[str], str] = lambda s: s, resolver: SecretResolver | None = None,
                 groups: GroupDirectory | None = None):
        self.db, self.kbs, self.ingestor, self.kb_documents, self.outbound, self.redact = \
            db, kbs, ingestor, documents, outbound, redact
        self.groups = groups  # where a source's group memberships go (its permission sync)
        self.resolver = resolver or SecretResolver()
        self.record: Callable[..., None] = lambda *entry: None  # the audit record (verbs.audit; given by the runtime)
        self.files = upload.Files(db)
        self.run_records = SourceRuns(db, redact)  # runs and their leases
        self.ledger = SourceLedger(db)  # what each source ingested
        self.uploads = upload.UploadedFiles(self.files, self.ledger, self.run_records, ingestor, self.source, self._remove, redact)
        self._previews = threading.BoundedSemaphore(MAX_PREVIEWS)
        state.migrate(db)

    def close(self) -> None:
        """A graceful shutdown: runs this process is carrying out read CANCELLED (as EDDI's), not left to be reaped."""
        self.run_records.close()

    # -- what is where ----------------------------------------------------------------------
    def source(self, kb_id: str, source_id: str) -> tuple[RagConfiguration, IngestionSource]:
        config = self.kbs.get(kb_id)
        source = config.source(source_id)
        if source is None:
            known = ", ".join(s.effective_id for s in config.sources) or "none"
            raise SourceNotFoundError(f"knowledge base {kb_id!r} has no source {source_id!r} (its sources: {known})")
        return config, source

    def context(self, kb_id: str, deadline: float | None = None, source: IngestionSource | None = None) -> SourceContext:
        """What a connector of ``kb_id``'s sources (of ``source``) may use (sources.base): a document over the smaller of
        the source's ``settings.maxBytesPerPage`` and the upload limit is refused before it is read."""
        tenant = self.kbs.resources.tenant_of("rags", kb_id)
        limit = max_upload_bytes() if source is None else min(max_upload_bytes(), source.settings.maxBytesPerPage)
        return SourceContext(kb_id, tenant, self.kbs.data_dir, self.outbound, lambda value: self.resolver.resolve(value, tenant),
                             self.files, limit, deadline)

    # -- runs -------------------------------------------------------------------------------
    def _runnable(self, kb_id: str, source_id: str) -> tuple[RagConfiguration, IngestionSource]:
        config, source = self.source(kb_id, source_id)
        if not source.enabled:
            raise SourceBusyError(f"source {source.effective_id!r} of knowledge base {kb_id!r} is disabled "
                                  f"(enabled: false); enable it to run it", source.effective_id)
        if unresolved := self.unresolved(kb_id, config, source):  # a 400 now, not a run that fails later
            raise ConfigValidationError(unresolved)
        return config, source

    def unresolved(self, kb_id: str, config: RagConfiguration, source: IngestionSource) -> list[dict[str, Any]]:
        """The source's secret fields (its connector's ``secret()``) whose reference does not resolve in the knowledge
        base's tenant, as validation errors naming the field."""
        block, tenant = source.block(source.type) or {}, self.kbs.resources.tenant_of("rags", kb_id)
        at = next(i for i, s in enumerate(config.sources) if s.effective_id == source.effective_id)
        out = []
        for name in secret_fields(source.type):
            value = block.get(name)
            if isinstance(value, str) and value.strip():
                try:
                    self.resolver.resolve(value, tenant)
                except SecretNotFoundError as e:
                    out.append({"path": f"$.sources[{at}].{source.type}.{name}", "value": value, "message": str(e)})
        return out

    def problems(self, kb_id: str) -> list[dict[str, str]]:
        """What keeps each enabled source of ``kb_id`` from keeping it in sync, for its health: {level, detail, fix} for a
        secret that does not resolve, a last run or permission sync that failed, documents that fail to ingest (kept
        until a run or a retry reads them fine: a delta run does not read an unchanged one again)."""
        config, out = self.kbs.get(kb_id), []
        for source in config.sources:
            if not source.enabled:
                continue
            sid, said = source.effective_id, f"source {source.name!r}"
            for e in self.unresolved(kb_id, config, source):
                out.append({"level": "failed", "detail": f"{said}: {e['path']}: {e['message']}",
                            "fix": "store the key in the tenant's vault (Configuration: the source's field, Store a key in "
                                   "the vault…) or correct the reference; a run is refused until it resolves"})
            runs = self.run_records.history(kb_id, sid, 50)
            last = next((r for r in runs if r.get("kind") != PERMISSIONS and r["status"] != RUNNING), None)
            if last is not None and last["status"] == FAILED:
                out.append({"level": "warning", "detail": f"{said}: its last run failed: {last.get('error') or 'no reason kept'}",
                            "fix": f"{last.get('fix') or 'correct what the error names'}, then press Run on the source's card "
                                   "(Documents: Sources)"})
            synced = next((r for r in runs if r.get("kind") == PERMISSIONS and r["status"] != RUNNING), None)
            if synced is not None and synced["status"] == FAILED:
                out.append({"level": "warning", "detail": f"{said}: its last permission sync failed ({synced.get('error')}): "
                                                          "its documents keep the readers of the sync before",
                            "fix": f"{synced.get('fix') or 'correct what the error names'}, then press Sync permissions on the "
                                   "source's card (Documents: Sources)"})
            failing = failing_documents(self.ledger.known(kb_id, sid))
            if failing:
                shown = "; ".join(f"{f['name']}: {f['reason']}" for f in failing[:3]) + (
                    f"; and {len(failing) - 3} more" if len(failing) > 3 else "")
                out.append({"level": "warning", "detail": f"{said}: {len(failing)} document(s) fail to ingest: {shown}",
                            "fix": f"replace or correct {'it' if len(failing) == 1 else 'them'} in the source, then press Retry "
                                   f"{len(failing)} failing on the source's card (Documents: Sources; REST: POST "
                                   f"…/sources/{sid}/retry)"})
        return out

    def start(self, kb_id: str, source_id: str) -> Run:
        """Begin a run and carry it out on a background thread; returns it RUNNING (409: busy or disabled; 400: a
        configuration its connector refuses, now rather than as a FAILED run later)."""
        config, source = self._runnable(kb_id, source_id)
        connector(source.type).validate(self.context(kb_id, None, source), source)
        run = self.run_records.begin(kb_id, source.effective_id, "run")
        self.record(config.tenant, "source.run", f"rags/{kb_id}", {"source": source.effective_id, "runId": run.runId})
        threading.Thread(target=self._carry_out, args=(kb_id, config, source, run, None), daemon=True,
                         name=f"eddi-rag-source-{source.effective_id}").start()
        return run

    def run(self, kb_id: str, source_id: str) -> Run:
        """A whole run, synchronously (the CLI, the scheduler)."""
        config, source = self._runnable(kb_id, source_id)
        run = self.run_records.begin(kb_id, source.effective_id, "run")
        self.record(config.tenant, "source.run", f"rags/{kb_id}", {"source": source.effective_id, "runId": run.runId})
        return self._carry_out(kb_id, config, source, run, None)

    def retry(self, kb_id: str, source_id: str, document_id: str | None = None) -> Run:
        """Ingest again the failed documents (or the one named), without listing the source."""
        config, source = self._runnable(kb_id, source_id)
        sid = source.effective_id
        failed = [r for r in self.ledger.known(kb_id, sid).values() if r["status"] == "failed"
                  and (document_id is None or r["document_id"] == document_id)]
        if document_id is not None and not failed:
            raise SourceNotFoundError(f"source {sid!r} has no failed document {document_id!r}")
        ctx, kind = self.context(kb_id, None, source), connector(source.type)
        items = [kind.one(ctx, source, r["document_id"], r["name"]) for r in failed]
        return self._carry_out(kb_id, config, source, self.run_records.begin(kb_id, sid, "retry"), items)

    def _carry_out(self, kb_id: str, config: RagConfiguration, source: IngestionSource, run: Run,
                   items: list[Item] | None) -> Run:
        sid, settings = source.effective_id, source.settings
        deadline = time.monotonic() + settings.timeBudgetMinutes * 60
        try:
            sink = _Ingesting(self, kb_id, config, source, run, deadline)
            if items is not None:  # a retry: these documents, concluding nothing about the others
                ended = feed(Listing(items, complete=False), sink)
            else:
                ended = self._synced(kb_id, source, sink, deadline)
            run.stopReason = run.stopReason or ended.stopped
            checks = [f"{w['name']}: {w['warning']}" for w in run.warnings]
            run.message = "; ".join([*ended.notes, *([f"{len(checks)} document(s) to check: " + "; ".join(checks[:5])] if checks else [])]) or None
            if ended.complete and run.stopReason is None:
                self._reconcile(kb_id, config, source, sink.listed, run, at_once=ended.relisted)
            if items is None and run.stopReason is None:  # its work recorded: the next run resumes past it
                self.ledger.advance(kb_id, sid, ended.cursor)
            run.status = COMPLETED
        except Exception as e:  # noqa: BLE001 - the run's status says what went wrong
            log.warning("source %s of %s failed: %s", sid, kb_id, e)
            run.status, run.error, run.fix = FAILED, self.redact(described(e)), fix_of(e)
        if settings.costPerThousandSegments is not None:
            run.costUsd = round(run.embedded / 1000 * settings.costPerThousandSegments, 6)
        run.finishedAt = fleet.now()
        run.failing = failing_documents(self.ledger.known(kb_id, sid))
        self.run_records.finish(run)
        return run

    def _synced(self, kb_id: str, source: IngestionSource, sink: Any, deadline: float | None) -> SyncEnd:
        """The source synced into ``sink`` from its cursor; a cursor the source no longer knows lists it in full."""
        sid, kind, ctx = source.effective_id, connector(source.type), self.context(kb_id, deadline, source)
        cursor = self.ledger.cursor(kb_id, sid)
        try:
            return kind.sync(ctx, source, cursor, sink)
        except CursorExpiredError as e:
            if cursor is None:
                raise
            ended = kind.sync(ctx, source, None, sink)
            ended.notes.insert(0, f"the cursor was no longer valid ({e}): the source was listed in full")
            ended.relisted = True
            return ended

    def _reconcile(self, kb_id: str, config: RagConfiguration, source: IngestionSource, listed: set[str], run: Run,
                   at_once: bool = False) -> None:
        """After a complete run: count a miss for each known document the listing lacks, remove those missed
        ``tombstoneAfterMissedRuns`` times; the purge marker likewise, which sweeps what no run wrote since. A source
        that held documents and lists none deletes nothing unless its connector can read it now (check_access).
        ``at_once``: a full listing after an expired cursor, standing in for the changes it would have told (a deletion
        among them): what it lacks is removed now, as a change's deletion is (later runs resume from a new cursor and
        would never name it again)."""
        sid, limit = source.effective_id, 1 if at_once else source.settings.tombstoneAfterMissedRuns
        known = self.ledger.known(kb_id, sid)
        if known and not listed:
            try:
                connector(source.type).check_access(self.context(kb_id, None, source), source)
            except Exception as e:  # noqa: BLE001 - whatever it is, nothing is concluded from an empty listing
                note = self.redact(f"listed no document where it held {len(known)}, and cannot be read now "
                                   f"({type(e).__name__}: {e}): nothing was deleted")
                run.message = "; ".join(filter(None, (run.message, note)))
                return
        found = reconcile(known, listed, limit)
        self.ledger.missed(kb_id, sid, found.missed)
        run.deleted += self._remove(kb_id, config, sid, found.gone)
        marker = self.ledger.purge_missed(kb_id, sid)
        if marker is None or run.failed:  # a document not read may still have only its old chunks
            return
        if marker + 1 < limit:
            self.ledger.purge_missed_once(kb_id, sid)
            return
        kept = sorted(set(known) - set(found.gone))
        where: dict[str, Any] = {"sourceId": sid}
        if kept:
            where["document_id"] = {"$nin": kept}
        self.kb_documents.delete_where(kb_id, where, config)
        self.ledger.purge_swept(kb_id, sid)

    def _one(self, kb_id: str, config: RagConfiguration, source: IngestionSource, item: Item, known: Any, run: Run) -> None:
        sid = source.effective_id
        acl = item.acl if item.acl is not None else source.settings.acl
        version = None if item.version is None else digest(config, source, b"version\0" + item.version.encode())
        if version is not None and known is not None and known["status"] == "ok" and known["version"] == version:
            if known["acl"] == acl_json(acl):
                run.unchanged += 1  # the source says so: not even read
                self.ledger.seen(kb_id, sid, item.document_id)
                return
            if self._relabelled(kb_id, sid, item.document_id, acl):  # only who may read it changed
                run.updated += 1
                self.ledger.seen(kb_id, sid, item.document_id)
                return
        try:
            data, content_type = item.fetch()
            content_type = content_type or item.media_type
            hashed = digest(config, source, data, acl)
            what = classify(known, hashed)
            if what == UNCHANGED:
                run.unchanged += 1
                if version is not None and known["version"] != version:  # read this once more: next time, not at all
                    self.ledger.record(kb_id, sid, item, hashed, None, version, acl)
                else:
                    self.ledger.seen(kb_id, sid, item.document_id)
                return
            fmt = detect(data, content_type, item.name)
            heard = _Heard()
            report = self.ingestor.ingest_file(kb_id, config, item.document_id, data, fmt, heard, source=item.name, acl=acl,
                                               metadata={**item.metadata, **({"url": item.url} if item.url else {}),
                                                         "sourceId": sid}, max_chars=source.settings.maxContentLength)
        except Exception as e:  # noqa: BLE001 - one document's failure is recorded, the run goes on
            reason = self.redact(str(e) or type(e).__name__)
            # the hash of the version still stored (None: nothing stored yet) stays, marked failed
            self.ledger.record(kb_id, sid, item, known["hash"] if known is not None else None, reason)  # (no version: read again)
            run.failed += 1
            run.failures.append({"document": item.document_id, "name": item.name, "reason": reason})
            return
        self.ledger.record(kb_id, sid, item, hashed, None, version, acl)  # only now: its chunks are stored
        run.warnings += [{"document": item.document_id, "name": item.name, "warning": w} for w in heard.said]
        run.embedded += report.embedded
        run.segments += report.chunks
        if what == ADD:
            run.added += 1
        else:
            run.updated += 1

    def _relabelled(self, kb_id: str, source_id: str, document_id: str, acl: list[str] | None) -> bool:
        """The document's chunks rewritten with ``acl``, their texts and vectors as they were; False where the store
        cannot (EDDI's layout keeps no lists, or no chunks are stored): it is read and written again instead."""
        try:
            self.kb_documents.set_acl(kb_id, document_id, acl if acl is not None else [])
        except (AclNotKeptError, ResourceNotFoundError):
            return False
        self.ledger.set_acl(kb_id, source_id, document_id, acl)
        return True

    # -- permissions kept by the source ------------------------------------------------------
    def start_permissions(self, kb_id: str, source_id: str) -> Run:
        """A permission sync on a background thread; returns it RUNNING (409 while the source is held)."""
        source, kind = self._permission_source(kb_id, source_id)
        run = self.run_records.begin(kb_id, source.effective_id, PERMISSIONS)
        threading.Thread(target=self._permissions, args=(kb_id, source, kind, run), daemon=True,
                         name=f"eddi-rag-permissions-{source.effective_id}").start()
        return run

    def sync_permissions(self, kb_id: str, source_id: str) -> Run:
        """Who may read each document the source brought, as the source says now, written to the chunks' ACLs without
        reading or embedding anything (a document the source no longer lists: nobody); and the group directory's
        memberships from the source's groups. A run of kind ``permissions`` in the source's history."""
        source, kind = self._permission_source(kb_id, source_id)
        return self._permissions(kb_id, source, kind, self.run_records.begin(kb_id, source.effective_id, PERMISSIONS))

    def _permission_source(self, kb_id: str, source_id: str) -> tuple[IngestionSource, PermissionSource]:
        _, source = self._runnable(kb_id, source_id)
        kind = connector(source.type)
        if not keeps_permissions(kind, source):
            raise NoPermissionsError(f"source {source.effective_id!r} ({source.type}) keeps no permissions of its own: its "
                                     "documents are read by settings.acl")
        return source, cast(PermissionSource, kind)

    def _permissions(self, kb_id: str, source: IngestionSource, kind: PermissionSource, run: Run) -> Run:
        sid = source.effective_id
        try:
            known = {d: r for d, r in self.ledger.known(kb_id, sid).items() if r["hash"] is not None}
            found = kind.permissions(self.context(kb_id, time.monotonic() + source.settings.timeBudgetMinutes * 60, source),
                                     source, sorted(known))
            failed = {f["document"] for f in found.failures}
            changed: list[dict[str, Any]] = []
            for document_id, row in known.items():
                if document_id in failed:
                    continue
                run.seen += 1
                acl = found.acls.get(document_id, [])
                if row["acl"] == acl_json(acl):
                    run.unchanged += 1
                elif self._relabelled(kb_id, sid, document_id, acl):
                    run.updated += 1
                    changed.append({"document": document_id, "before": json.loads(row["acl"]) if row["acl"] else None,
                                    "after": acl})
            run.failed, run.failures = len(found.failures), found.failures
            tenant = self.kbs.resources.tenant_of("rags", kb_id)
            if self.groups is not None:
                kept = self.groups.synced(tenant, f"source:{kb_id}/{sid}", found.groups)
                run.message = f"{kept} group memberships of {len(found.groups)} users from the source"
            if not known:
                run.message = ("the source has brought no documents yet, so no permission was set: run the source; each run "
                               "reads its documents' permissions too")
            self.record(tenant, "acl.synced", f"rags/{kb_id}", {"source": sid, "documents": changed,
                                                                "users": len(found.groups)})
            run.status = COMPLETED
        except Exception as e:  # noqa: BLE001 - the run's status says what went wrong
            log.warning("permission sync of source %s of %s failed: %s", sid, kb_id, e)
            run.status, run.error, run.fix = FAILED, self.redact(described(e)), fix_of(e)
        run.finishedAt = fleet.now()
        self.run_records.finish(run)
        return run

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
        known = self.ledger.known(kb_id, sid)
        sink = _Previewing(self, kb_id, config, source, known)
        ended = self._synced(kb_id, source, sink, time.monotonic() + 120)
        plan = {**sink.plan, "complete": ended.complete, "notes": ended.notes}
        if ended.complete:
            plan["delete"] = reconcile(known, sink.listed, source.settings.tombstoneAfterMissedRuns).gone
        return {"runId": None, "sourceId": sid, "outcome": "PREVIEW", "documentsSeen": len(sink.listed),
                "documentsIngested": len(plan["add"]) + len(plan["update"]), "documentsUnchanged": len(plan["unchanged"]),
                "documentsSkipped": 0, "documentsFailed": len(plan["failures"]), "documentsTombstoned": len(plan["delete"]),
                "segmentsStored": 0, "costUsd": None, "replaceUnsupported": False, "tombstoningSkipped": not ended.complete,
                "stopReason": next(iter(ended.notes), None), "message": "; ".join(ended.notes) or None, **plan,
                "estimate": self._estimate(kb_id, source, sink.to_embed)}

    def _estimate(self, kb_id: str, source: IngestionSource, to_embed: int) -> dict[str, Any]:
        """A preview's chunks to embed against the source's caps (and their cost, when it has a price)."""
        settings = source.settings
        month = self.run_records.embedded_this_month(kb_id, source.effective_id)
        monthly = settings.maxSegmentsPerMonth
        left = settings.maxSegmentsPerRun if monthly is None else min(settings.maxSegmentsPerRun, max(0, monthly - month))
        return {"segmentsToEmbed": to_embed, "maxSegmentsPerRun": settings.maxSegmentsPerRun,
                "embeddedThisMonth": month, "maxSegmentsPerMonth": monthly, "withinCaps": to_embed <= left,
                "costUsd": None if settings.costPerThousandSegments is None
                else round(to_embed / 1000 * settings.costPerThousandSegments, 6)}

    def runs(self, kb_id: str, source_id: str, limit: int = 20) -> list[dict[str, Any]]:
        """The run history, newest first: ``limit`` runs, at most MAX_RUNS_LISTED."""
        _, source = self.source(kb_id, source_id)
        return self.run_records.history(kb_id, source.effective_id, limit)

    def documents(self, kb_id: str, source_id: str, readable: Node | None = None) -> list[dict[str, Any]]:
        """The source's documents; ``readable``: only those stored that a reader may read (retrieval.access; None: all)."""
        _, source = self.source(kb_id, source_id)
        known = list(self.ledger.known(kb_id, source.effective_id).values())
        if readable is not None:
            seen = self.kb_documents.seen(kb_id, [r["document_id"] for r in known], readable)
            known = [r for r in known if r["document_id"] in seen]
        return [{"documentId": r["document_id"], "name": r["name"], "status": r["status"], "reason": r["reason"],
                 "updatedAt": r["updated_at"], "missedRuns": r["missed"]} for r in known]

    def reset_cursor(self, kb_id: str, source_id: str) -> dict[str, Any]:
        """The source's next run lists it in full instead of resuming from its cursor (the cursor is forgotten; what
        was ingested stays). 409 while a run holds the source."""
        return {"status": "reset", "sourceId": self._while_held(kb_id, source_id, self.ledger.reset_cursor)}

    def status(self, kb_id: str, source_id: str) -> dict[str, Any]:
        """What the Manager's source card shows: what the source needs, its cursor, its last run and when the next
        one is due (its cron, UTC), whether it keeps its own permissions and its last permission sync."""
        _, source = self.source(kb_id, source_id)
        sid, kind = source.effective_id, connector(source.type)
        runs, known = self.run_records.history(kb_id, sid, 50), self.ledger.known(kb_id, sid)
        last = next((r for r in runs if r.get("kind") != PERMISSIONS), None)
        synced = next((r for r in runs if r.get("kind") == PERMISSIONS), None)
        nxt = None
        if source.enabled and source.when:
            from datetime import datetime, timezone

            from croniter import croniter

            nxt = croniter(source.when, datetime.now(timezone.utc)).get_next(datetime).isoformat(timespec="seconds")
        return {"sourceId": sid, "type": source.type, "needs": getattr(kind, "needs", ""),
                "where": kind.where(source) if hasattr(kind, "where") else source.type, "cursor": self.ledger.cursor(kb_id, sid),
                "documents": sum(1 for r in known.values() if r["status"] != "failed"), "lastRun": last, "nextRun": nxt,
                "keepsPermissions": keeps_permissions(kind, source), "lastPermissionSync": synced,
                "failing": failing_documents(known),
                "permissionSyncMinutes": source.settings.permissionSyncMinutes}

    def test(self, kb_id: str, source_id: str) -> dict[str, Any]:
        """Whether the source can be read now (its connector's check_access: the credentials, the endpoint, the
        folder): ``{ok: true}``, or ``{ok: false, error}`` saying why (secrets redacted). Nothing is ingested."""
        _, source = self.source(kb_id, source_id)
        kind, ctx = connector(source.type), self.context(kb_id, time.monotonic() + 30, source)
        try:
            kind.validate(ctx, source)
            kind.check_access(ctx, source)
        except Exception as e:  # noqa: BLE001 - whatever it is, the answer says it
            return {"sourceId": source.effective_id, "ok": False, "error": self.redact(described(e))}
        return {"sourceId": source.effective_id, "ok": True}

    def cursor(self, kb_id: str, source_id: str) -> str | None:
        _, source = self.source(kb_id, source_id)
        return self.ledger.cursor(kb_id, source.effective_id)

    def purge(self, kb_id: str, source_id: str) -> dict[str, Any]:
        """Forget what the source ingested, keeping its chunks (EDDI's purge): the next run ingests everything
        it finds again; what it no longer finds is swept after ``tombstoneAfterMissedRuns`` complete runs.
        409 while a run holds the source."""
        sid = self._while_held(kb_id, source_id, self.ledger.purged)
        self.record(self.kbs.resources.tenant_of("rags", kb_id), "source.purged", f"rags/{kb_id}", {"source": sid})
        return {"status": "purged", "sourceId": sid}

    def _while_held(self, kb_id: str, source_id: str, change: Callable[[str, str], None]) -> str:
        """``change(kb_id, source id)`` to the ledger while no run may start (a PURGE claim; 409 while a run holds the
        source); returns the source's id."""
        _, source = self.source(kb_id, source_id)
        sid = source.effective_id
        claim = self.run_records.begin(kb_id, sid, PURGE)
        try:
            change(kb_id, sid)
        finally:
            self.run_records.end_claim(claim)
        return sid

    def remove_documents(self, kb_id: str, source_id: str) -> int:
        """Take every document of the source out of the knowledge base and forget them; returns how many
        (our older purge, kept for the CLI and for a source removed from the configuration)."""
        config, source = self.source(kb_id, source_id)
        sid = source.effective_id
        return self._remove(kb_id, config, sid, list(self.ledger.known(kb_id, sid)))

    def forget_source(self, kb_id: str, config: RagConfiguration, source_id: str, chunks: bool = True) -> None:
        """A source removed from the configuration (or given another type): its chunks leave the knowledge base
        (``chunks``; with ``config``, the configuration it had), its state and files are forgotten; its run history stays."""
        if chunks:
            self.kb_documents.delete_where(kb_id, {"sourceId": source_id}, config)
        self.ledger.forget_source(kb_id, source_id)

    def _remove(self, kb_id: str, config: RagConfiguration, source_id: str, document_ids: list[str]) -> int:
        """Take documents of the source out of the knowledge base and forget them; returns how many."""
        for document_id in document_ids:
            self.kb_documents.delete_where(kb_id, {"document_id": document_id}, config)
            self.ledger.forget(kb_id, source_id, document_id)
        return len(document_ids)



class _Heard(Silent):
    """What an ingestion of a source's document said to check (its text cut to maxContentLength, pages OCR read poorly)."""

    def __init__(self) -> None:
        self.said: list[str] = []

    def warn(self, text: str) -> None:
        self.said.append(text)


def failing_documents(known: dict[str, Any]) -> list[dict[str, str]]:
    """The documents whose latest ingestion failed, by name: {documentId, name, reason}."""
    return [{"documentId": r["document_id"], "name": r["name"] or r["document_id"], "reason": r["reason"] or "no reason kept"}
            for r in sorted(known.values(), key=lambda r: r["name"] or r["document_id"]) if r["status"] == "failed"]


PROGRESS_SECONDS = 0.5  # a running run's counts are kept at most this often


class _Ingesting:
    """The sink of a run: each document ingested (or counted unchanged) as the connector names it, until a limit."""

    def __init__(self, sync: SourceSync, kb_id: str, config: RagConfiguration, source: IngestionSource, run: Run,
                 deadline: float):
        self.sync, self.kb_id, self.config, self.source, self.run, self.deadline = sync, kb_id, config, source, run, deadline
        self.known = sync.ledger.known(kb_id, source.effective_id)
        self.listed: set[str] = set()
        self.told = 0.0  # when the run's counts were last kept (a face follows them: PROGRESS_SECONDS apart)
        monthly = source.settings.maxSegmentsPerMonth
        self.month = 0 if monthly is None else sync.run_records.embedded_this_month(kb_id, source.effective_id, run.runId)

    def document(self, item: Item) -> bool:
        run, settings = self.run, self.source.settings
        run.seen += 1  # (named by the source: a stop below leaves it neither ingested nor missing)
        monthly = settings.maxSegmentsPerMonth
        if time.monotonic() > self.deadline:
            run.stopReason = f"timeBudgetMinutes ({settings.timeBudgetMinutes}) reached"
        elif run.embedded >= settings.maxSegmentsPerRun:
            run.stopReason = f"maxSegmentsPerRun ({settings.maxSegmentsPerRun}) reached"
        elif monthly is not None and self.month + run.embedded >= monthly:
            run.stopReason = (f"maxSegmentsPerMonth ({monthly}) reached: {self.month + run.embedded:,} chunks embedded by "
                              "this source's runs this month (UTC)")
        if run.stopReason:
            return False  # what is left is neither ingested nor missing: nothing is concluded
        self.listed.add(item.document_id)
        self.sync._one(self.kb_id, self.config, self.source, item, self.known.get(item.document_id), run)
        self._tell()
        return True

    def _tell(self) -> None:
        if time.monotonic() - self.told >= PROGRESS_SECONDS:
            self.told = time.monotonic()
            self.sync.run_records.progress(self.run)

    def unchanged(self, document_id: str) -> None:
        self.run.seen += 1
        self.listed.add(document_id)
        if document_id in self.known:  # (one never ingested, such as a file its loader skips, is no news)
            self.run.unchanged += self.known[document_id]["status"] == "ok"  # (one that fails stays among the failing)
            self.sync.ledger.seen(self.kb_id, self.source.effective_id, document_id)
        self._tell()

    def deleted(self, document_id: str) -> None:
        self.run.deleted += self.sync._remove(self.kb_id, self.config, self.source.effective_id, [document_id])
        self._tell()

    def error(self, document_id: str, reason: str) -> None:
        self.run.failed += 1
        known = self.known.get(document_id)
        self.run.failures.append({"document": document_id, "name": (known["name"] if known else None) or document_id, "reason": reason})
        self._tell()


class _Previewing:
    """The sink of a preview: what a run would do with each document, reading it (and chunking what it would ingest,
    to count the chunks to embed) but embedding and writing nothing."""

    def __init__(self, sync: SourceSync, kb_id: str, config: RagConfiguration, source: IngestionSource, known: dict[str, Any]):
        self.sync, self.kb_id, self.config, self.source, self.known = sync, kb_id, config, source, known
        self.listed: set[str] = set()
        self.plan: dict[str, Any] = {"add": [], "update": [], "unchanged": [], "delete": [], "failures": []}
        self.to_embed = 0

    def document(self, item: Item) -> bool:
        self.listed.add(item.document_id)
        try:
            data, content_type = item.fetch()
            acl = item.acl if item.acl is not None else self.source.settings.acl
            what = classify(self.known.get(item.document_id), digest(self.config, self.source, data, acl))
            if what != UNCHANGED:
                self.to_embed += self.sync.ingestor.estimate(self.kb_id, self.config, item.document_id, data,
                                                             detect(data, content_type, item.name),
                                                             self.source.settings.maxContentLength, item.name)
        except Exception as e:  # noqa: BLE001
            self.plan["failures"].append({"document": item.document_id, "reason": str(e) or type(e).__name__})
            return True
        self.plan[what].append(item.document_id)
        return True

    def unchanged(self, document_id: str) -> None:
        self.listed.add(document_id)
        if document_id in self.known:
            self.plan["unchanged"].append(document_id)

    def deleted(self, document_id: str) -> None:
        self.plan["delete"].append(document_id)

    def error(self, document_id: str, reason: str) -> None:
        self.plan["failures"].append({"document": document_id, "reason": reason})
