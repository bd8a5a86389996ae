"""Per-resource access to a knowledge base, as EDDI's sharing has it: VIEW (query it, read its documents and health)
or EDIT (also ingest, change its documents and configuration) for a user or a group, on top of the tenant's roles.
A knowledge base with no grant is the tenant's as before; one with grants is reachable only by the principals they
name (and the tenant's administrators)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

VIEW, EDIT = "VIEW", "EDIT"
ACCESS = (VIEW, EDIT)


class GrantRequestError(EddiRagError, ValueError):
    """A grant that cannot be kept (HTTP 400); the message names it."""
    status = 400


class KbGrants:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def of(self, tenant: str, kb_id: str) -> dict[str, str]:
        """{principal: VIEW | EDIT} of a knowledge base."""
        return {r["principal"]: r["access"] for r in self.db.query(
            "SELECT principal, access FROM kb_grants WHERE tenant=? AND kb_id=? ORDER BY principal", (tenant, kb_id))}

    def set(self, tenant: str, kb_id: str, grants: Sequence[dict[str, Any]]) -> dict[str, str]:
        """The knowledge base's grants are ``grants`` ([{principal: user:<id> | group:<id>, access: VIEW | EDIT}]) from
        now on, in one transaction; an empty list gives it back to the tenant's roles alone."""
        wanted: dict[str, str] = {}
        for i, g in enumerate(grants):
            principal, access = g.get("principal"), g.get("access")
            if not isinstance(principal, str) or not principal.startswith(("user:", "group:")) or len(principal) > 300 \
                    or "," in principal or len(principal.split(":", 1)[1]) == 0:
                raise GrantRequestError(f"grants[{i}].principal: {principal!r} is no user:<id> or group:<id>")
            if access not in ACCESS:
                raise GrantRequestError(f"grants[{i}].access: {access!r} is not one of VIEW, EDIT")
            wanted[principal] = EDIT if EDIT in (access, wanted.get(principal)) else VIEW
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self.db.transaction() as c:
            c.execute("DELETE FROM kb_grants WHERE tenant=? AND kb_id=?", (tenant, kb_id))
            for principal, access in wanted.items():
                c.execute("INSERT INTO kb_grants (tenant, kb_id, principal, access, granted_on) VALUES (?,?,?,?,?)",
                          (tenant, kb_id, principal, access, now))
        return self.of(tenant, kb_id)

    def forget(self, kb_id: str) -> None:
        """A knowledge base deleted for good takes its grants with it."""
        self.db.execute("DELETE FROM kb_grants WHERE kb_id=?", (kb_id,))
