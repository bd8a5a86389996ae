"""The audit record as callers ask for it (records.audit): its entries filtered as an auditor asks (who was shown a
document, what a user was shown, what an administrator changed), and the chain verified. Read by administrators and by
the ``auditor`` role, which reads this and nothing else."""

from __future__ import annotations

import builtins
from datetime import datetime, timedelta, timezone
from typing import Any

from eddi_rag.records.audit import ACTING, FACES, Acting, AuditLog, acting

__all__ = ["ACTING", "FACES", "Acting", "Audit", "acting"]


class Audit:
    def __init__(self, log: AuditLog):
        self.log = log

    def entries(self, tenant: str, **filters: Any) -> builtins.list[dict[str, Any]]:
        """The tenant's entries in order, filtered (action, face, user, subject, document, since, until, limit, after)."""
        return self.log.entries(tenant=tenant, **filters)

    def verify(self) -> dict[str, Any]:
        """The whole chain walked: {ok, entries, problems: [{seq, problem}]} (every tenant's entries are links of it)."""
        return self.log.verify()

    def erase(self, tenant: str, user: str) -> int:
        """Erase ``user``'s query texts from the tenant's entries (GDPR Art. 17); the chain still verifies."""
        return self.log.erase(tenant, user)

    def prune(self, days: float, tenant: str | None = None) -> int:
        """Remove the entries older than ``days`` (the chain stays verifiable); returns how many. ``tenant``: its entries
        alone, emptied in place."""
        before = (datetime.now(timezone.utc) - timedelta(days=days)).isoformat(timespec="microseconds")
        return self.log.prune(before, tenant)

    def retain(self, now: datetime | None = None) -> dict[str, int]:
        """Every tenant's retention applied as of ``now`` (the scheduler's, hourly): {tenant: entries emptied}."""
        return self.log.retain(now)

    def settings(self, tenant: str) -> dict[str, Any]:
        """The tenant's auditRetentionDays and auditQueries (``None``: the server's default) and ``effective``."""
        return self.log.settings(tenant)

    def set_settings(self, tenant: str, auditRetentionDays: float | None = None, auditQueries: str | None = None) -> dict[str, Any]:
        """Set the tenant's settings (``None``: the server's default); the change is an entry."""
        return self.log.set_settings(tenant, auditRetentionDays, auditQueries)

    def record(self, tenant: str, action: str, subject: str | None = None, detail: dict[str, Any] | None = None) -> None:
        """An administrative action (a configuration saved, a key made or revoked, a user's groups set)."""
        self.log.append(tenant, action, subject, detail)
