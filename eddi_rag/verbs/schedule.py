"""Scheduled source runs: every ``interval`` seconds, each enabled source whose ``cron`` (UTC; ``schedule``,
our older spelling) fired since the last look is started (skipped, with a log line, when a run of it is still under way),
and each source keeping its own permissions has them synced every ``settings.permissionSyncMinutes``; every hour,
each tenant's audit retention is applied (``retention``: records.audit's ``retain``). Runs
missed while the server was down are not made up; the next fire time runs as usual.

One scheduler looks in a fleet: the process holding the state database's ``scheduler`` role (on PostgreSQL an
advisory lock, lost with its holder's connection; on SQLite, the one process). The last look is kept in the state
(``fleet_ticks``), so the process that takes the role over goes on from it: a tick is never run twice."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone

from eddi_rag.config import IngestionSource
from eddi_rag.sources.base import keeps_permissions
from eddi_rag.sources.connectors import connector
from eddi_rag.sources.runs import PERMISSIONS, SourceBusyError
from eddi_rag.state.sqlite import StateDatabase
from eddi_rag.verbs.knowledge_bases import KnowledgeBases
from eddi_rag.verbs.sources import SourceSync

log = logging.getLogger(__name__)


ROLE = "scheduler"
RETENTION_EVERY = timedelta(hours=1)


class SourceScheduler:
    def __init__(self, kbs: KnowledgeBases, sources: SourceSync, db: StateDatabase, interval: float | None = None,
                 retention: Callable[[datetime], dict[str, int]] | None = None):
        """``interval``: seconds between looks (EDDI_RAG_SCHEDULER_SECONDS, default 30); ``retention``: applies the
        audit record's retention (hourly)."""
        self.kbs, self.sources, self.db, self.retention = kbs, sources, db, retention
        self.retained: datetime | None = None
        self.interval = interval or float(os.environ.get("EDDI_RAG_SCHEDULER_SECONDS", "30"))
        self.last = datetime.now(timezone.utc)
        self.leading = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _sources(self) -> Iterator[tuple[str, IngestionSource]]:
        """(kb id, source) of every enabled source of every tenant's knowledge bases."""
        for d in self.kbs.every(None):
            kb_id = d.resource.split("/")[-1].split("?")[0]
            try:
                config = self.kbs.get(kb_id)
            except Exception:  # noqa: BLE001 - deleted meanwhile, or invalid: nothing to schedule
                continue
            yield from ((kb_id, source) for source in config.sources if source.enabled)

    def due(self, now: datetime) -> list[tuple[str, str]]:
        """(kb id, source id) of every source whose schedule fired in (last look, now]."""
        from croniter import croniter  # (at the first look, off a start's path)

        return [(kb_id, source.effective_id) for kb_id, source in self._sources()
                if source.when and croniter(source.when, self.last).get_next(datetime) <= now]

    def due_permissions(self, now: datetime) -> list[tuple[str, str]]:
        """(kb id, source id) of every source keeping its own permissions whose last permission sync started
        ``settings.permissionSyncMinutes`` ago or more (one that never ran: once it has documents)."""
        out = []
        for kb_id, source in self._sources():
            minutes, sid = source.settings.permissionSyncMinutes, source.effective_id
            if not (minutes and keeps_permissions(connector(source.type), source)):
                continue
            last = self.sources.run_records.last_started(kb_id, sid, PERMISSIONS)
            if last is None and not self.sources.ledger.known(kb_id, sid):
                continue
            if last is None or datetime.fromisoformat(last).replace(tzinfo=timezone.utc) + timedelta(minutes=minutes) <= now:
                out.append((kb_id, sid))
        return out

    def tick(self, now: datetime | None = None) -> list[str]:
        """Start the due runs and permission syncs; returns their run ids."""
        now = now or datetime.now(timezone.utc)
        started = []
        due = [(self.sources.start, kb, sid) for kb, sid in self.due(now)]
        for start, kb_id, source_id in due + [(self.sources.start_permissions, kb, sid) for kb, sid in self.due_permissions(now)]:
            try:
                started.append(start(kb_id, source_id).runId)
            except SourceBusyError as e:
                log.info("scheduled run skipped: %s", e)
            except Exception as e:  # noqa: BLE001 - one source's problem never stops the others
                log.warning("scheduled run of %s/%s could not start: %s", kb_id, source_id, e)
        self.last = now
        if self.retention is not None and (self.retained is None or now - self.retained >= RETENTION_EVERY):
            self.retained = now
            try:
                if pruned := self.retention(now):
                    log.info("audit retention: entries emptied per tenant %s", pruned)
            except Exception as e:  # noqa: BLE001 - the next hour tries again; the sources' runs are not held up
                log.warning("audit retention could not be applied: %s", e)
        return started

    def look(self, now: datetime | None = None) -> list[str] | None:
        """A tick of the fleet's scheduler, if this process holds the role (None: another does): from the last
        look the state keeps (whoever made it) to ``now``."""
        if not self.db.leader(ROLE):
            self.leading = False
            return None
        if not self.leading:
            log.info("this process holds the scheduler role now (%s)", self.sources.run_records.leases.owner)
            self.leading = True
        now = now or datetime.now(timezone.utc)
        rows = self.db.query("SELECT last FROM fleet_ticks WHERE name=?", (ROLE,))
        # kept before the runs start: a holder that dies in between loses this tick's runs rather than its
        # successor running them twice; kept only over the look it read (a look written meanwhile, by an operator
        # moving it back or a holder before this one, is gone on from at the next look, not overwritten)
        looked = now.isoformat(timespec="milliseconds")
        if rows:
            self.last = datetime.fromisoformat(rows[0]["last"])
            kept = self.db.execute("UPDATE fleet_ticks SET last=? WHERE name=? AND last=?", (looked, ROLE, rows[0]["last"])).rowcount
        else:
            kept = self.db.execute("INSERT INTO fleet_ticks VALUES (?, ?) ON CONFLICT (name) DO NOTHING", (ROLE, looked)).rowcount
        if not kept:
            return []
        return self.tick(now)

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="eddi-rag-scheduler", daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.look()
            except Exception as e:  # noqa: BLE001 - the state is out of reach now: the next look tries again
                log.warning("scheduler: %s", e)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self.leading:
            self.db.release(ROLE)
            self.leading = False
