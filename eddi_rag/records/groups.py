"""The group directory: which groups a user belongs to, per tenant, for a reader named by a caller acting for users
(the agent runtime's key, an in-process caller, the LlmTask hook): their searches read what those groups may
(retrieval.access). An operator fills it (``eddi-rag groups add``, ``PUT /ragstore/groups/{user}``), or a connector
syncs it; a request never says which groups its user is in."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from eddi_rag import state
from eddi_rag.common.principals import not_an_id
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

MAX_GROUPS = 1_000  # groups of one user


class GroupRequestError(EddiRagError, ValueError):
    """A user or group id that cannot be kept (HTTP 400); the message names it."""
    status = 400


def _checked(name: str, what: str) -> str:
    if not_an_id(name):
        raise GroupRequestError(f"{what} {name!r} is not an id: 1 to 200 characters, no commas, no control characters, "
                                "not starting with a space")
    return name


class GroupDirectory:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def of(self, tenant: str, user: str) -> list[str]:
        """The groups ``user`` belongs to in ``tenant`` (sorted)."""
        return [r["group_id"] for r in self.db.query(
            "SELECT group_id FROM group_members WHERE tenant=? AND user_id=? ORDER BY group_id", (tenant, user))]

    def set(self, tenant: str, user: str, groups: Sequence[str]) -> list[str]:
        """``user``'s groups are ``groups`` from now on (one transaction: a reader never sees half of it), besides the
        memberships a source's permission sync keeps (``synced``), which change at the source."""
        user = _checked(user, "user")
        wanted = list(dict.fromkeys(_checked(g, "group") for g in groups))
        if len(wanted) > MAX_GROUPS:
            raise GroupRequestError(f"groups: at most {MAX_GROUPS:,} per user, got {len(wanted):,}")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        with self.db.transaction() as c:
            c.execute("DELETE FROM group_members WHERE tenant=? AND user_id=? AND origin=''", (tenant, user))
            for group in wanted:
                c.execute("INSERT INTO group_members (tenant, user_id, group_id, added_on) VALUES (?,?,?,?) "
                          "ON CONFLICT (tenant, user_id, group_id) DO NOTHING", (tenant, user, group, now))
        return self.of(tenant, user)

    def synced(self, tenant: str, origin: str, memberships: dict[str, list[str]]) -> int:
        """The memberships ``origin`` (a source's permission sync) says, in place of the ones it said before, in one
        transaction; one the operator also set stays the operator's. Returns how many it keeps now."""
        now, kept = datetime.now(timezone.utc).isoformat(timespec="seconds"), 0
        with self.db.transaction() as c:
            c.execute("DELETE FROM group_members WHERE tenant=? AND origin=?", (tenant, origin))
            for user, groups in memberships.items():
                if not_an_id(user):
                    continue  # (a user id no reader can have: nothing to keep)
                for group in dict.fromkeys(g for g in groups if not not_an_id(g)):
                    kept += c.execute("INSERT INTO group_members (tenant, user_id, group_id, added_on, origin) "
                                      "VALUES (?,?,?,?,?) ON CONFLICT (tenant, user_id, group_id) DO NOTHING",
                                      (tenant, user, group, now, origin)).rowcount
        return kept

    def add(self, tenant: str, user: str, groups: Sequence[str]) -> list[str]:
        return self.set(tenant, user, [*self.of(tenant, user), *groups])

    def remove(self, tenant: str, user: str, groups: Sequence[str]) -> list[str]:
        gone = set(groups)
        return self.set(tenant, user, [g for g in self.of(tenant, user) if g not in gone])

    def members(self, tenant: str) -> dict[str, list[str]]:
        """Every user of ``tenant`` with a group, and their groups."""
        out: dict[str, list[str]] = {}
        for r in self.db.query("SELECT user_id, group_id FROM group_members WHERE tenant=? ORDER BY user_id, group_id",
                               (tenant,)):
            out.setdefault(r["user_id"], []).append(r["group_id"])
        return out

    def memberships(self, tenant: str) -> list[dict[str, str]]:
        """Every membership of ``tenant``, with where it comes from: {user, group, origin ("" the operator's,
        ``source:<kb>/<source>`` a source's permission sync), addedOn}."""
        return [{"user": r["user_id"], "group": r["group_id"], "origin": r["origin"], "addedOn": r["added_on"]}
                for r in self.db.query("SELECT user_id, group_id, origin, added_on FROM group_members WHERE tenant=? "
                                       "ORDER BY user_id, group_id", (tenant,))]

