"""What the processes sharing one state (a fleet: ``serve`` replicas and ``worker``s) know of each other.

Work one process holds (an ingestion job, a source run) names its owner, ``host:pid:token``, and a lease
(``lease_until``) the owner renews while it works. Another process takes the work over once the lease ran
out, or at once when the owner is known to have ended: a process of this machine that is gone, or a
queue of this process that stopped. Of another machine nothing is known but its leases."""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

log = logging.getLogger(__name__)

DEFAULT_LEASE_SECONDS = 30.0
HOST = socket.gethostname()
_LIVE: set[str] = set()  # the owners of this process that still work


def now(after: float = 0.0) -> str:
    """UTC now (plus ``after`` seconds) as the state keeps times: ISO 8601 to the millisecond, comparable as text."""
    return (datetime.now(timezone.utc) + timedelta(seconds=after)).isoformat(timespec="milliseconds")


def lease_seconds_from_env() -> float:
    """EDDI_RAG_JOB_LEASE_SECONDS (default 30): how long a worker's hold on a job or a run lasts unrenewed."""
    raw = os.environ.get("EDDI_RAG_JOB_LEASE_SECONDS", str(DEFAULT_LEASE_SECONDS))
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if not 0.5 <= seconds <= 3600:
        raise ValueError(f"EDDI_RAG_JOB_LEASE_SECONDS must be a number of seconds from 0.5 to 3600, got {raw!r}")
    return seconds


def new_owner() -> str:
    """An owner of this process, working until ``ended`` (again after ``working``)."""
    owner = f"{HOST}:{os.getpid()}:{secrets.token_hex(4)}"
    working(owner)
    return owner


def working(owner: str) -> None:
    _LIVE.add(owner)


def ended(owner: str) -> None:
    _LIVE.discard(owner)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_ended(owner: str | None) -> bool:
    """Whether the owner of a lease is known to have ended (see the module doc)."""
    host, _, rest = (owner or "").partition(":")
    pid, _, _token = rest.partition(":")
    if host != HOST or not pid.isdigit():
        return False
    return owner not in _LIVE if int(pid) == os.getpid() else not alive(int(pid))


def expired(owner: str | None, lease_until: str | None) -> bool:
    """Whether another process may take over work held by ``owner`` until ``lease_until``: its lease ran out, or
    its owner is known to have ended."""
    return owner_ended(owner) or (lease_until or "") < now()


class Leases:
    """The leases one process holds on the rows of one table (ingestion jobs, source runs): one owner, the rows
    held, and a thread renewing them every min(1 s, a third of the lease) while any is held.

    ``renew(id, until)`` writes one row's new ``lease_until`` (with whatever else the table keeps fresh, such as a
    job's progress) and says whether the row is still this owner's; ``lost(id)`` hears of one that is not (taken
    over after a pause, or cancelled elsewhere). Both run on the renewal thread; a failed renewal is logged and
    tried again at the next turn."""

    def __init__(self, name: str, renew: Callable[[str, str], bool], lost: Callable[[str], None] = lambda _id: None,
                 seconds: float | None = None, redact: Callable[[str], str] = lambda s: s):
        self.name, self._renew, self._lost, self.redact = name, renew, lost, redact
        self.seconds = seconds or lease_seconds_from_env()
        self.owner = new_owner()
        self._held: set[str] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def until(self) -> str:
        """When a lease taken or renewed now runs out."""
        return now(self.seconds)

    def hold(self, id: str) -> None:
        """``id`` is this owner's now (its row written with ``owner`` and ``until()``): renewed until ``release``."""
        with self._lock:
            self._held.add(id)
            if self._thread is None:
                self._thread = threading.Thread(target=self._renewing, name=f"eddi-rag-leases-{self.name}", daemon=True)
                self._thread.start()

    def release(self, id: str) -> None:
        with self._lock:
            self._held.discard(id)

    def held(self) -> set[str]:
        with self._lock:
            return set(self._held)

    def __contains__(self, id: object) -> bool:
        with self._lock:
            return id in self._held

    def renew(self) -> None:
        """Renew every lease held now."""
        for id in self.held():
            if not self._renew(id, self.until()):
                self._lost(id)

    def _renewing(self) -> None:
        while True:
            time.sleep(min(1.0, self.seconds / 3))
            with self._lock:
                if not self._held:
                    self._thread = None
                    return
            try:
                self.renew()
            except Exception as e:  # noqa: BLE001 - out of reach now: the next renewal tries again
                log.warning("%s leases not renewed: %s", self.name, self.redact(str(e)))

    def working(self) -> None:
        """This owner works (again): its leases are not taken as those of an ended owner."""
        working(self.owner)

    def ended(self) -> None:
        """This owner stopped: the rows it still holds may be taken over at once by a process of this machine."""
        ended(self.owner)
