"""What the processes sharing one state (a fleet: ``serve`` replicas and ``worker``s) know of each other.

Work one process holds (an ingestion job, a source run) names its owner, ``host:pid:token``, and a lease
(``lease_until``) the owner renews while it works. Another process takes the work over once the lease ran
out, or at once when the owner is known to have ended: a process of this machine that is gone, or a
queue of this process that stopped. Of another machine nothing is known but its leases."""

from __future__ import annotations

import os
import secrets
import socket
from datetime import datetime, timedelta, timezone

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
