"""Who owns each physical store: the table, collection or index (Qdrant local mode: folder#collection) a
knowledge base's chunks live in, by engine, recorded in the state (``store_claims``) with the tenant and KB
that claimed it and how:

- ``created``: it did not exist when it was claimed: this product makes it, and may drop it;
- ``adopted``: it existed (an EDDI table) and an admin of the tenant adopted it (``?adopt=true``): never dropped;
- ``claimed``: recorded at first use, for a KB saved before ownership was recorded: never dropped;
- ``unverified``: named outright and saved while its engine could not be reached (down, a host not resolvable
  yet, a key stored later): nobody could tell whether it existed. Its first use asks the engine before any read
  or write: a place that does not exist becomes ``created``; one that exists is refused until an admin adopts it.

A KB may address a physical store only if its tenant holds it or nobody does. Another tenant naming it gets a
400 that says the name is not available, whether or not it exists. Several KBs of one tenant share one only in
EDDI's ``"id"`` layout, where each reads and writes only the chunks tagged with its own id.

A name is one place per engine, whichever server a configuration reaches it on: one server has many spellings
(``localhost``, ``127.0.0.1``, a DNS alias, a socket), so keying by server would let a tenant reach another's
table through a second spelling. The server is recorded for people to read, without credentials.

A name is also one place whatever its spelling (``canonical``): a Qdrant local folder by its real path (``..`` and
symbolic links resolved), a pgvector table as PostgreSQL reads it (an unquoted name folded to lower case, the
``public.`` schema left out), any other collection or index compared without case (a false match only refuses a
name). And, as EDDI's ``KnowledgeBaseStorageGuard`` rules (labsai/EDDI, since its isolation change of 2026-10-02 and
the review of PR #945), a location a configuration names anew is written out, never a ``${vars:…}`` / ``${vault:…}``
reference (what it resolves to is decided later, by whoever may write the variable), may not start with EDDI's reserved
``eddi_kb`` (in any dot-separated part), and a pgvector table is a plain identifier (``location_errors``); a location
another knowledge base of the tenant holds is shared only by a caller who may edit that one (``refusal``'s
``may_edit``: EDDI's "cannot edit")."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from eddi_rag import state
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

CREATED, ADOPTED, CLAIMED, UNVERIFIED = "created", "adopted", "claimed", "unverified"
NAMED = ("tableName", "table", "collectionName", "indexName", "path")  # parameters that name a place outright
RESERVED_PREFIX = "eddi_kb"  # EDDI derives every default location from it: a named location may not use it
PLAIN_PG_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}(?:\.[A-Za-z_][A-Za-z0-9_$]{0,62})?")


class StoreNotAvailableError(EddiRagError, ValueError):
    """The physical store a configuration names is not this knowledge base's to use (HTTP 400)."""
    status = 400


class AdoptionRequiredError(StoreNotAvailableError):
    """The named store exists and nobody holds it (an EDDI table): an admin adopts it explicitly."""


@dataclass(frozen=True)
class Place:
    engine: str
    name: str  # table / collection / index; Qdrant local mode: folder#collection
    layout: str  # "ours", or EDDI's "name" / "id" (chunks tagged kbId=<id>: shareable)
    explicit: bool  # named by the configuration (it may exist already), not derived from the KB's fresh id
    server: str = ""  # for people: host[:port] or socket folder, no credentials
    shown: str = ""  # for people: the place as the configuration spells it (never the server's own folders)

    def describe(self) -> str:
        return f"{self.engine} {'table' if self.engine == 'pgvector' else 'collection'} {(self.shown or self.name)!r}"


def canonical(engine: str, name: str) -> str:
    """The one spelling of a physical place two configurations are compared in (the store's ``place`` has resolved
    a local folder already, and given a pgvector table as PostgreSQL names it): collections and indexes without
    case; a Qdrant local folder keeps its case (a file system's), its collection does not."""
    if engine == "pgvector":
        return name
    folder, sep, collection = name.rpartition("#")
    return f"{folder}{sep}{collection.strip().lower()}"


def named_location(params: dict[str, Any]) -> tuple[str, str] | None:
    """The storeParameters key and value that name a table, collection or index outright (None: none)."""
    for key in ("tableName", "table", "collectionName", "indexName"):
        value = params.get(key)
        if isinstance(value, str) and value.strip():
            return key, value
    return None


def location_errors(store_type: str, params: dict[str, Any], before: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """EDDI's rules for a location a configuration names (``KnowledgeBaseStorageGuard``), as validation errors; a
    value the version before (``before``'s storeParameters) already held is not judged again, so a stored
    configuration is never refused on a save that does not touch it."""
    named = named_location(params)
    if named is None or (before is not None and named_location(before) == named):
        return []
    key, value = named
    where = f"$.storeParameters.{key}"
    if "${" in value:
        return [{"path": where, "value": value,
                 "message": "must be a literal name, not a ${...} reference: the location decides which knowledge base's "
                            "documents an agent reads, so it is checked when it is saved, and a variable or vault value can "
                            "change after that. Write the table, collection or index out"}]
    if store_type == "pgvector" and not PLAIN_PG_TABLE.fullmatch(value.strip()):
        return [{"path": where, "value": value,
                 "message": "must be a plain table name, optionally qualified with the public schema (letters, digits, "
                            "'_' and '$', starting with a letter or '_'): quotes, spaces and punctuation are refused"}]
    if store_type == "pgvector" and "." in value and value.strip().split(".")[0].lower() != "public":
        return [{"path": where, "value": value, "message": "names a schema other than public: this product's tables live "
                                                           "in the public schema"}]
    if any(part.strip().startswith(RESERVED_PREFIX) for part in value.strip().lower().split(".")):
        return [{"path": where, "value": value,
                 "message": f"may not start with {RESERVED_PREFIX!r}: every knowledge base's default location starts with it, "
                            "so the name could address another knowledge base's store. Choose another name, or leave it "
                            "out to get a location of this knowledge base's own"}]
    return []


def server_of(params: dict[str, Any]) -> str:
    """Where a store is reached, for people: host[:port] (no user, no password)."""
    for key in ("url", "baseUrl", "connectionString"):
        value = params.get(key)
        if isinstance(value, str) and "://" in value:
            parts = urlsplit(value)
            host = parts.netloc.rsplit("@", 1)[-1]
            return host or (parts.query.partition("host=")[2].split("&")[0])
    if params.get("path"):
        return str(params["path"])
    return f"{params.get('host', 'localhost')}:{params['port']}" if params.get("port") else str(params.get("host", ""))


class StoreOwnership:
    def __init__(self, db: StateDatabase):
        state.migrate(db)
        self.db = db

    def holders(self, place: Place) -> list[dict[str, Any]]:
        return self.db.query("SELECT * FROM store_claims WHERE engine=? AND place=? ORDER BY claimed_on, kb_id",
                             (place.engine, place.name))

    def of_kb(self, kb_id: str) -> list[dict[str, Any]]:
        return self.db.query("SELECT * FROM store_claims WHERE kb_id=? ORDER BY engine, place", (kb_id,))

    def of_tenant(self, tenant: str) -> list[dict[str, Any]]:
        return self.db.query("SELECT * FROM store_claims WHERE tenant=? ORDER BY engine, place", (tenant,))

    @staticmethod
    def refusal(tenant: str, kb_id: str, place: Place, holders: list[dict[str, Any]],
                may_edit: Callable[[str], bool] | None = None) -> str | None:
        """Why ``kb_id`` of ``tenant`` may not use ``place`` held by ``holders`` (None: it may). ``may_edit(kb_id)``: whether
        the caller may edit another knowledge base (None: nobody to ask, an import or the Python API); naming a place anew
        that others hold needs that for each of them, as EDDI's guard asks (the other one is not named: it may be hidden
        from the caller); a place the knowledge base holds already is not judged again."""
        others = [h for h in holders if h["kb_id"] != kb_id]
        if any(h["tenant"] != tenant for h in others):
            return (f"{place.describe()} is not available to this tenant; choose another name (or leave it out: "
                    "each knowledge base gets a store of its own)")
        anew = len(others) == len(holders)
        if may_edit is not None and anew and not all(may_edit(h["kb_id"]) for h in others):
            return (f"{place.describe()} is already the location of another knowledge base, which you cannot edit; "
                    "choose a location of this knowledge base's own (or leave it out)")
        if others and not (place.layout == "id" and all(h["layout"] == "id" for h in others)):
            return (f"{place.describe()} is used by knowledge base {others[0]['kb_id']!r}; knowledge bases share a store "
                    "only in EDDI's \"id\" layout (storeNamespace: \"id\"), each reading its own chunks")
        return None

    def claim(self, tenant: str, kb_id: str, place: Place, how: str) -> str:
        """Record that ``kb_id`` of ``tenant`` uses ``place`` (StoreNotAvailableError if it may not); returns how
        the place is held (a place already held keeps its ``how``: shared, it is still what it was)."""
        with self.db.transaction() as c:
            holders = [dict(r) for r in c.execute("SELECT * FROM store_claims WHERE engine=? AND place=?",
                                                  (place.engine, place.name)).fetchall()]
            if why := self.refusal(tenant, kb_id, place, holders):
                raise StoreNotAvailableError(why)
            own = next((h for h in holders if h["kb_id"] == kb_id), None)
            held = own["how"] if own else (holders[0]["how"] if holders else how)
            if own is not None and held == UNVERIFIED and how != CLAIMED:  # now verified (or adopted)
                held = how
                c.execute("UPDATE store_claims SET how=? WHERE engine=? AND place=? AND kb_id=?",
                          (how, place.engine, place.name, kb_id))
            if own is None:
                c.execute("INSERT INTO store_claims (engine, place, tenant, kb_id, how, layout, server, claimed_on) "
                          "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                          (place.engine, place.name, tenant, kb_id, held, place.layout, place.server, _now()))
            elif own["layout"] != place.layout:
                c.execute("UPDATE store_claims SET layout=? WHERE engine=? AND place=? AND kb_id=?",
                          (place.layout, place.engine, place.name, kb_id))
            return held

    def release(self, kb_id: str, keep: Place | None = None) -> None:
        """``kb_id`` no longer uses its places (but ``keep``)."""
        with self.db.transaction() as c:
            for row in c.execute("SELECT engine, place FROM store_claims WHERE kb_id=?", (kb_id,)).fetchall():
                if keep is None or (row["engine"], row["place"]) != (keep.engine, keep.name):
                    c.execute("DELETE FROM store_claims WHERE engine=? AND place=? AND kb_id=?", (row["engine"], row["place"], kb_id))

    def how(self, kb_id: str, place: Place) -> str | None:
        """How ``kb_id`` holds ``place`` (None: it does not)."""
        rows = self.db.query("SELECT how FROM store_claims WHERE engine=? AND place=? AND kb_id=?", (place.engine, place.name, kb_id))
        return rows[0]["how"] if rows else None

    def sole_creator(self, kb_id: str, place: Place) -> bool:
        """Whether ``kb_id`` alone holds ``place`` and this product created it: only then may it be dropped."""
        holders = self.holders(place)
        return [h["kb_id"] for h in holders] == [kb_id] and holders[0]["how"] == CREATED


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
