"""The resource store: every version of every resource in one table of the state database (SQLite, or a
fleet's PostgreSQL)."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.resource_types import (
    DEFAULT_TENANT,
    RESOURCE_TYPES,
    Descriptor,
    ResourceNotFoundError,
    ResourceRef,
    VersionConflictError,
    resource_uri,
)
from eddi_rag.state.sqlite import StateDatabase

LISTING_PAGE = 500  # resources read per page by ``every``
_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _check_kind(kind: str) -> None:
    if kind not in RESOURCE_TYPES:
        raise ValueError(f"unknown resource kind {kind!r}; known: {', '.join(RESOURCE_TYPES)}")


def _descriptor(kind: str, r: Any) -> Descriptor:
    return Descriptor(resource=resource_uri(kind, r["id"], r["current_version"]), name=r["name"],
                      description=r["description"], createdOn=r["created_on"], lastModifiedOn=r["last_modified_on"])


class ResourceStore:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    # -- helpers --------------------------------------------------------------------------
    def _head(self, kind: str, id: str, tenant: str | None = None) -> Any:
        """The live resource's row; another tenant's (when ``tenant`` is given) does not exist."""
        _check_kind(kind)
        rows = self.db.query("SELECT * FROM resources WHERE kind=? AND id=? AND deleted=0 AND (? IS NULL OR tenant=?)",
                             (kind, id, tenant, tenant))
        if not rows:
            raise ResourceNotFoundError(f"{kind}/{id} not found")
        return rows[0]

    # -- the store -------------------------------------------------------------------------
    def create(self, kind: str, data: dict[str, Any], description: str = "", id: str | None = None,
               tenant: str = DEFAULT_TENANT, name: str = "", kept: dict[str, bytes] | None = None,
               author: str | None = None) -> ResourceRef:
        """Create version 1 in ``tenant``. ``id`` lets an import keep readable ids; it must be unused. ``name``: the
        descriptor's (default: ``data``'s ``name``); ``kept``: files that came with it (``kept``), by relative path;
        ``author``: who saved it (``versions``)."""
        _check_kind(kind)
        if id is not None and not _ID.fullmatch(id):
            raise ValueError(f"invalid resource id {id!r}: use 1-64 letters, digits, '-' or '_'")
        id, now = id or secrets.token_hex(12), _now()
        with self.db.transaction() as c:
            if c.execute("SELECT 1 FROM resources WHERE kind=? AND id=?", (kind, id)).fetchone():
                raise ValueError(f"{kind}/{id} already exists")
            c.execute("INSERT INTO resource_versions (kind, id, version, data, created_on, author) VALUES (?,?,?,?,?,?)",
                      (kind, id, 1, json.dumps(data), now, author))
            c.execute(
                "INSERT INTO resources (kind, id, current_version, name, description, created_on, last_modified_on, "
                "deleted, tenant) VALUES (?,?,?,?,?,?,?,0,?)",
                (kind, id, 1, name or str(data.get("name", "")), description or str(data.get("description", "")), now, now,
                 tenant),
            )
            for path, body in (kept or {}).items():
                c.execute("INSERT INTO kept_files VALUES (?,?,?,?)", (kind, id, path, body))
        return ResourceRef(kind, id, 1)

    def kept(self, kind: str, id: str) -> dict[str, bytes]:
        """The files kept with a resource at its creation (an EDDI import's parts this product does not model), by
        path relative to it, byte for byte."""
        _check_kind(kind)
        return {r["path"]: bytes(r["body"]) for r in
                self.db.query("SELECT path, body FROM kept_files WHERE kind=? AND id=? ORDER BY path", (kind, id))}

    def tenant_of(self, kind: str, id: str) -> str:
        """The tenant a resource belongs to (soft-deleted ones too)."""
        _check_kind(kind)
        rows = self.db.query("SELECT tenant FROM resources WHERE kind=? AND id=?", (kind, id))
        if not rows:
            raise ResourceNotFoundError(f"{kind}/{id} not found")
        return rows[0]["tenant"]

    def current_version(self, kind: str, id: str, tenant: str | None = None) -> int:
        return self._head(kind, id, tenant)["current_version"]

    def exists(self, kind: str, id: str, tenant: str | None = None) -> bool:
        """Whether ``kind/id`` exists (in ``tenant``, when given) and is not deleted."""
        try:
            self._head(kind, id, tenant)
            return True
        except ResourceNotFoundError:
            return False

    def read(self, kind: str, id: str, version: int = 0, tenant: str | None = None) -> dict[str, Any]:
        """A version (0: the current one); with ``tenant``, another tenant's resource is not found."""
        head = self._head(kind, id, tenant)
        version = version or head["current_version"]
        rows = self.db.query(
            "SELECT data FROM resource_versions WHERE kind=? AND id=? AND version=?", (kind, id, version)
        )
        if not rows:
            raise ResourceNotFoundError(f"{kind}/{id} has no version {version}")
        return json.loads(rows[0]["data"])

    def read_owned(self, kind: str, id: str, version: int = 0) -> tuple[dict[str, Any], str, int]:
        """``read``'s version, the tenant it belongs to and its number, in one query (a search reads its knowledge
        base's configuration each time: on a fleet's PostgreSQL every query is a round trip)."""
        _check_kind(kind)
        rows = self.db.query(
            "SELECT v.data, r.tenant, v.version FROM resources r JOIN resource_versions v ON v.kind = r.kind AND v.id = r.id AND "
            "v.version = CASE WHEN ? = 0 THEN r.current_version ELSE ? END WHERE r.kind=? AND r.id=? AND r.deleted=0",
            (version, version, kind, id))
        if not rows:
            self.read(kind, id, version)  # the error that says which is missing: the resource or its version
            raise ResourceNotFoundError(f"{kind}/{id} not found")
        return json.loads(rows[0]["data"]), rows[0]["tenant"], rows[0]["version"]

    def update(self, kind: str, id: str, version: int, data: dict[str, Any], author: str | None = None) -> ResourceRef:
        with self.db.transaction() as c:
            head = self._head(kind, id)
            current = head["current_version"]
            if version != current:
                raise VersionConflictError(kind, id, version, current)
            now = _now()
            c.execute("INSERT INTO resource_versions (kind, id, version, data, created_on, author) VALUES (?,?,?,?,?,?)",
                      (kind, id, current + 1, json.dumps(data), now, author))
            c.execute(
                "UPDATE resources SET current_version=?, name=?, last_modified_on=? WHERE kind=? AND id=?",
                (current + 1, str(data.get("name", head["name"])), now, kind, id),
            )
        return ResourceRef(kind, id, current + 1)

    def versions(self, kind: str, id: str, tenant: str | None = None) -> list[dict[str, Any]]:
        """Each version of the resource, newest first: {version, createdOn, author} (author None: nobody was asked)."""
        self._head(kind, id, tenant)
        return [{"version": r["version"], "createdOn": r["created_on"], "author": r["author"]}
                for r in self.db.query("SELECT version, created_on, author FROM resource_versions WHERE kind=? AND id=? "
                                       "ORDER BY version DESC", (kind, id))]

    def duplicate(self, kind: str, id: str, version: int = 0) -> ResourceRef:
        head = self._head(kind, id)
        return self.create(kind, self.read(kind, id, version), head["description"], tenant=head["tenant"], name=head["name"],
                           kept=self.kept(kind, id))

    def delete(self, kind: str, id: str, version: int = 0, permanent: bool = False) -> None:
        with self.db.transaction() as c:
            if permanent:
                _check_kind(kind)
                gone = c.execute("DELETE FROM resources WHERE kind=? AND id=?", (kind, id)).rowcount
                c.execute("DELETE FROM resource_versions WHERE kind=? AND id=?", (kind, id))
                c.execute("DELETE FROM kept_files WHERE kind=? AND id=?", (kind, id))
                if not gone:
                    raise ResourceNotFoundError(f"{kind}/{id} not found")
                return
            head = self._head(kind, id)
            if version and version != head["current_version"]:
                raise VersionConflictError(kind, id, version, head["current_version"])
            c.execute("UPDATE resources SET deleted=1, last_modified_on=? WHERE kind=? AND id=?", (_now(), kind, id))

    def descriptors(self, kind: str, filter: str = "", index: int = 0, limit: int = 20,
                    tenant: str | None = None) -> list[Descriptor]:
        """Newest first; ``index`` is a page number of ``limit`` entries, as in EDDI; ``tenant``: only its own."""
        _check_kind(kind)
        rows = self.db.query(
            "SELECT * FROM resources WHERE kind=? AND deleted=0 AND (name LIKE ? OR description LIKE ?)"
            " AND (? IS NULL OR tenant=?) ORDER BY last_modified_on DESC, id LIMIT ? OFFSET ?",
            (kind, f"%{filter}%", f"%{filter}%", tenant, tenant, max(0, limit), max(0, index) * max(0, limit)),
        )
        return [_descriptor(kind, r) for r in rows]

    def every(self, kind: str, tenant: str | None, filter: str = "") -> Iterator[Descriptor]:
        """Every resource of ``kind`` of ``tenant`` (None: of every tenant) whose name or description holds
        ``filter``, newest first, read a page at a time: no caller stops at a cap of its own."""
        index = 0
        while True:
            page = self.descriptors(kind, filter, index, LISTING_PAGE, tenant)
            yield from page
            if len(page) < LISTING_PAGE:
                return
            index += 1

    def descriptor(self, kind: str, id: str, tenant: str | None = None) -> Descriptor:
        return _descriptor(kind, self._head(kind, id, tenant))

    def ids(self, kind: str) -> list[str]:
        _check_kind(kind)
        return [r["id"] for r in self.db.query("SELECT id FROM resources WHERE kind=? AND deleted=0", (kind,))]
