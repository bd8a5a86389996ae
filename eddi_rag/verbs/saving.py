"""Saving resources, whoever saves them (REST, the Manager, a bundle, the memory KBs): every write
passes ``KnowledgeBases.checked``; a knowledge base's update reopens its store and, as EDDI's does, takes away
what a source dropped from ``sources[]`` (or given another ``type``) brought in; its delete stops its
ingestions and (permanent) drops its chunks and its sources' state and files.

A knowledge base's physical store is claimed when it is saved (stores.ownership): a place another tenant holds
is refused (400), one that exists and nobody holds is used only when an admin adopts it (``adopt``)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from eddi_rag.auth import ForbiddenError, Principal
from eddi_rag.common.outbound import UnresolvableHostError
from eddi_rag.common.secrets import SecretNotFoundError
from eddi_rag.config import ConfigValidationError, RagConfiguration
from eddi_rag.ingest.jobs import IngestionQueue
from eddi_rag.resource_types import DEFAULT_TENANT, ResourceNotFoundError, ResourceRef
from eddi_rag.resources import ResourceStore
from eddi_rag.stores.base import StoreUnavailableError
from eddi_rag.stores.ownership import (
    ADOPTED,
    CLAIMED,
    CREATED,
    NAMED,
    UNVERIFIED,
    AdoptionRequiredError,
    Place,
    StoreNotAvailableError,
    location_errors,
)
from eddi_rag.verbs.documents import Documents
from eddi_rag.verbs.knowledge_bases import KnowledgeBases
from eddi_rag.verbs.sealing import Sealing, restored

log = logging.getLogger(__name__)


CLAIMED_ONCE = "store-claims-recorded"  # (fleet_ticks: claim_existing has run)
CHUNKING = ("chunkStrategy", "chunkSize", "chunkOverlap")  # the fields whose change re-chunks every kept file


class Saving:
    def __init__(self, resources: ResourceStore, kbs: KnowledgeBases, documents: Documents, jobs: IngestionQueue,
                 source_removed: Callable[[str, RagConfiguration, str, bool], None] = lambda *a: None,
                 kb_gone: Callable[[str], None] = lambda kb_id: None,
                 rechunk: Callable[[str], object] = lambda kb_id: None, sealing: Sealing | None = None):
        """``source_removed(kb_id, config before, source id, its chunks too)``: forget a source's state and files
        (SourceSync.forget_source); ``kb_gone(kb_id)``: forget what else is kept of a knowledge base deleted for good
        (its grants: KbGrants.forget); ``rechunk(kb_id)``: parse its kept files again, after a version that chunks
        differently (Ingesting.reparse_all). ``sealing``: where a secret typed into a knowledge base goes (the vault;
        verbs.sealing)."""
        self.resources, self.kbs, self.documents, self.jobs = resources, kbs, documents, jobs
        self.sealing = sealing or Sealing(None)
        self.source_removed, self.kb_gone, self.rechunk = source_removed, kb_gone, rechunk
        self.relabel: Callable[[str], object] = lambda kb_id: None  # (Ingesting.relabel, given by the runtime)
        self.record: Callable[..., None] = lambda *entry: None  # the audit record (verbs.audit; given by the runtime)
        self.may: Callable[[Principal, str, str], bool] | None = None  # (caller, kb, VIEW/EDIT): the grants (verbs.access)

    def _recorded(self, ref: ResourceRef, tenant: str, how: str) -> ResourceRef:
        """``ref``, its save written to the audit record (the version and who saved it; never its content)."""
        self.record(tenant, f"configuration.{how}", f"{ref.kind}/{ref.id}", {"version": ref.version})
        return ref

    def create(self, kind: str, data: Any, tenant: str = DEFAULT_TENANT, id: str | None = None,
               description: str = "", adopt: bool = False, who: Principal | None = None) -> ResourceRef:
        """Version 1 of a new resource (``id``: keep this one; it must be unused). ``adopt``: the caller, an admin
        of ``tenant``, adopts the existing physical store the knowledge base names (stores.ownership). ``who``: the
        caller, whose verified user owns a new knowledge base (``owner``) unless an administrator names another."""
        id = id or secrets.token_hex(12)
        sealed, pending = self.sealing.seal(data, tenant, id, kind)
        if kind != "rags":
            saved = self.kbs.checked(kind, sealed, tenant)
            kept = self.sealing.keep(tenant, id, _name(saved, id), pending, kind)
            try:
                return self._recorded(self.resources.create(kind, saved, description=description, id=id, tenant=tenant,
                                                            author=author_of(who)), tenant, "created")
            except BaseException:
                self.sealing.undo(tenant, kept)
                raise
        saved = self.kbs.checked(kind, _with_access(kind, sealed, None, who), tenant)
        claimed = self._claim(id, saved, tenant, adopt, who=who)
        kept = self.sealing.keep(tenant, id, _name(saved, id), pending)
        try:
            return self._recorded(self.resources.create(kind, saved, description=description, id=id, tenant=tenant,
                                                        author=author_of(who)), tenant, "created")
        except BaseException:
            self.sealing.undo(tenant, kept)
            if claimed is not None:
                self.documents.ownership.release(id)
            raise

    def update(self, kind: str, id: str, version: int, data: Any, tenant: str = DEFAULT_TENANT,
               adopt: bool = False, who: Principal | None = None) -> ResourceRef:
        """A new version; ``version`` must be the current one (VersionConflictError otherwise). A knowledge base's
        ``audience``, ``aclMode`` and ``owner`` left out are kept (an EDDI client, which knows none of them, never
        opens a knowledge base to everyone by saving it); only an administrator changes the owner."""
        before = self._config(id) if kind == "rags" else None
        sealed, pending = self._sealed(kind, id, data, tenant)
        return self._update_checked(kind, id, version, self.kbs.checked(kind, _with_access(kind, sealed, before, who), tenant),
                                    tenant, adopt, pending, author_of(who), who)

    def put(self, kind: str, id: str, data: Any, tenant: str = DEFAULT_TENANT) -> ResourceRef:
        """``id`` holding ``data``: created, or a new version when its current one differs (else unchanged)."""
        try:
            current = self.resources.current_version(kind, id, tenant=tenant)
        except ResourceNotFoundError:
            return self.create(kind, data, tenant, id)
        sealed, pending = self._sealed(kind, id, data, tenant)
        saved = self.kbs.checked(kind, _with_access(kind, sealed, self._config(id) if kind == "rags" else None, None), tenant)
        if self.resources.read(kind, id, current) == saved and not pending:
            return ResourceRef(kind, id, current)
        return self._update_checked(kind, id, current, saved, tenant, pending=pending)

    def _sealed(self, kind: str, id: str, data: Any, tenant: str) -> tuple[Any, list[tuple[str, str]]]:
        """A resource's new version with its typed secrets sealed (verbs.sealing), a ``${vault:REDACTED}`` the client
        read back from a stored literal put back first (nothing it saves as it read it is lost)."""
        try:
            stored = self.resources.read(kind, id)
        except ResourceNotFoundError:
            stored = None
        return self.sealing.seal(restored(data, stored, kind), tenant, id, kind)

    def _claim(self, kb_id: str, saved: dict[str, Any], tenant: str, adopt: bool,
               before: RagConfiguration | None = None, who: Principal | None = None) -> Place | None:
        """Claim the physical store ``saved`` addresses for ``kb_id`` (ConfigValidationError: a location EDDI's rules
        refuse; StoreNotAvailableError: another tenant holds it, or another KB outside EDDI's "id" layout;
        AdoptionRequiredError: it exists and nobody holds it). A place named outright whose engine cannot be asked
        (down, a host not resolvable yet, a key stored later) is held ``unverified``: its first use asks
        (``EmbeddingStoreFactory``), and the save's answer says so (``Health.unresolved``)."""
        config = self.kbs.as_used(saved, tenant)
        same_type = before is not None and before.storeType == config.storeType  # (as stored: ``before``'s ${vars:…} are replaced)
        previous = (self.resources.read("rags", kb_id).get("storeParameters") or {}) if same_type else None
        if errors := location_errors(config.storeType, saved.get("storeParameters") or {}, previous):
            raise ConfigValidationError(errors)
        stores, ownership = self.documents.stores, self.documents.ownership
        place = stores.place(kb_id, config)
        if place is None:
            return None
        holders = ownership.holders(place)  # refused before the engine is asked: nothing says whether it exists
        if why := ownership.refusal(tenant, kb_id, place, holders, self._editable(who)):
            raise StoreNotAvailableError(why)
        own = next((h for h in holders if h["kb_id"] == kb_id), None)
        how = CREATED
        if place.explicit and (not holders or (own is not None and own["how"] == UNVERIFIED)):
            try:
                exists = stores.exists(kb_id, config)
            except (SecretNotFoundError, StoreUnavailableError, UnresolvableHostError) as e:
                log.info("knowledge base %s: cannot tell whether %s exists (%s): unverified until its first use",
                         kb_id, place.describe(), e)
                how = ADOPTED if adopt else UNVERIFIED
            else:
                if exists and not adopt:
                    raise AdoptionRequiredError(
                        f"{place.describe()} exists already and no knowledge base holds it: an admin of this tenant "
                        "adopts it by saving with ?adopt=true (it is then never dropped), or name another")
                how = ADOPTED if exists else CREATED
        ownership.claim(tenant, kb_id, place, how)
        return place

    def _editable(self, who: Principal | None) -> Callable[[str], bool] | None:
        """Whether ``who`` may edit a knowledge base (EDDI's guard asks it of one whose location a save names too)."""
        may = self.may
        return None if who is None or may is None else lambda kb_id: may(who, kb_id, "EDIT")

    def claim_existing(self) -> None:
        """Record the physical stores of knowledge bases saved before ownership was recorded (once: while no store
        is claimed and it has not run before), so a later configuration of another tenant cannot take them. Two KBs
        of different tenants on one place: the first keeps it, the other is refused when it is used. (A data folder
        of embedded stores alone claims nothing: it ran, validating every configuration, at every start: 1 s.)"""
        ownership = self.documents.ownership
        if ownership.db.query("SELECT 1 FROM store_claims LIMIT 1") or ownership.db.query(
                "SELECT 1 FROM fleet_ticks WHERE name=?", (CLAIMED_ONCE,)):
            return
        for kb_id in self.resources.ids("rags"):
            config = self._config(kb_id)
            try:
                place = self.documents.stores.place(kb_id, config) if config is not None else None
                if place is not None:
                    ownership.claim(config.tenant, kb_id, place, CLAIMED)  # type: ignore[union-attr]
            except (StoreNotAvailableError, ValueError, ImportError) as e:
                log.warning("knowledge base %s: its store is not claimed: %s", kb_id, e)
        ownership.db.execute("INSERT INTO fleet_ticks VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                             (CLAIMED_ONCE, datetime.now(timezone.utc).isoformat()))

    def _update_checked(self, kind: str, id: str, version: int, saved: dict[str, Any], tenant: str = DEFAULT_TENANT,
                        adopt: bool = False, pending: list[tuple[str, str]] | None = None, author: str | None = None,
                        who: Principal | None = None) -> ResourceRef:
        """``pending``: the secrets sealed out of ``saved`` (verbs.sealing), kept in the vault with it."""
        before = self._config(id) if kind == "rags" else None
        claimed = self._claim(id, saved, tenant, adopt, before, who) if kind == "rags" else None
        old = self.documents.stores.place(id, before) if before is not None else None
        sealed = self.sealing.keep(tenant, id, _name(saved, id), pending or [], kind)
        try:
            ref = self._recorded(self.resources.update(kind, id, version, saved, author), tenant, "saved")
        except BaseException:
            self.sealing.undo(tenant, sealed)
            if claimed is not None and claimed != old:
                self.documents.ownership.release(id, keep=old)
            raise
        if kind == "rags":
            self.documents.ownership.release(id, keep=claimed)
            self.documents.forget_store(id)
            if before is not None:
                after = RagConfiguration.model_validate(saved)  # (checked above)
                kept = {s.effective_id: s.type for s in after.sources}
                for source in before.sources:
                    if kept.get(source.effective_id) != source.type:  # dropped, or another type: gone with its chunks
                        self.source_removed(id, before, source.effective_id, True)
                if any(getattr(after, f) != getattr(before, f) for f in CHUNKING):
                    self.rechunk(id)  # the documents chunked as the new version says, from their kept files
                if after.language != before.language:
                    self.relabel(id)  # the documents' languages as the new version says (the keyword half's analysis)
        return ref

    def _config(self, id: str) -> RagConfiguration | None:
        try:
            return self.kbs.get(id)
        except (ResourceNotFoundError, ConfigValidationError):
            return None

    def duplicate(self, kind: str, id: str, version: int = 0, who: Principal | None = None,
                  name: str | None = None) -> ResourceRef:
        """A copy under a new id. A knowledge base's copy gets a store of its own, as EDDI's does: EDDI's "name"
        layout becomes "id" (the copy's chunks tagged with its id), and a place named in our layout is left out;
        ``who`` made it, and owns it as any knowledge base its caller creates (the version's author too); ``name``: the
        copy's (the Manager's "(copy)")."""
        if kind != "rags":
            return self.resources.duplicate(kind, id, version)
        tenant = self.resources.tenant_of(kind, id)
        data = own_store(self.resources.read(kind, id, version))
        if who is not None:  # (the copy is its maker's, not the original's owner's)
            data = {k: v for k, v in data.items() if k != "owner"}
        if name is not None:
            data = {**data, "name": name}
        return self.create(kind, data, tenant, description=self.resources.descriptor(kind, id).description, who=who)

    def delete(self, kind: str, id: str, version: int = 0, permanent: bool = False) -> None:
        """Soft delete (the history kept; a KB's chunks untouched) or permanent (every version; a KB's
        chunks dropped from its store first). A KB's waiting ingestions stop either way."""
        if kind == "rags":
            self.jobs.cancel_kb(id)  # a processing one stops within a second
            if permanent:
                before = self._config(id)
                try:
                    self.documents.drop(id)
                except ResourceNotFoundError:
                    pass  # already soft-deleted: its config is gone, nothing we can open to drop
                except StoreNotAvailableError:
                    pass  # it names a store it does not hold (saved before ownership was recorded): nothing of it there
                self.jobs.let_go(id)  # the documents' kept files
                if before is not None:
                    for source in before.sources:
                        self.source_removed(id, before, source.effective_id, False)  # (the chunks went with the store)
        tenant = self.resources.tenant_of(kind, id)
        self.resources.delete(kind, id, version, permanent)
        self.record(tenant, "configuration.deleted", f"{kind}/{id}", {"permanent": permanent})
        if kind == "rags" and permanent:
            self.documents.ownership.release(id)
            self.kb_gone(id)


ACCESS_FIELDS = {"audience": "AGENT_USERS", "aclMode": "enforce", "owner": None}  # who may read, and their defaults


def _with_access(kind: str, data: Any, before: RagConfiguration | None, who: Principal | None) -> Any:
    """``data`` of a knowledge base with who may read it settled: what an update leaves out is kept from ``before``;
    a new one is owned by ``who``'s verified user unless it names an owner; only an administrator names another owner
    (ForbiddenError naming ``$.owner``)."""
    if kind != "rags" or not isinstance(data, dict):
        return data
    out = dict(data)
    for field, default in ACCESS_FIELDS.items():
        if field not in out and before is not None and getattr(before, field) != default:
            out[field] = getattr(before, field)
    current = before.owner if before is not None else None
    mine = f"user:{who.user_id}" if who is not None and who.user_id else None
    if who is not None and not who.allows("admin") and "owner" in data and data["owner"] != current \
            and not (current is None and data["owner"] == mine):
        raise ForbiddenError("$.owner: only an administrator of the tenant names another owner of a knowledge base")
    if before is None and out.get("owner") is None and mine is not None:
        out["owner"] = mine
    return out


def own_store(data: dict[str, Any]) -> dict[str, Any]:
    """A knowledge base's configuration as a copy (a duplicate, an import) saves it: in a store of its own. EDDI's
    "name" layout becomes "id", as EDDI stamps on duplicate and import; in our layout a named place is left out."""
    if data.get("storeNamespace") == "name":
        return {**data, "storeNamespace": "id"}
    if not data.get("storeNamespace") and any(k in (data.get("storeParameters") or {}) for k in NAMED):
        return {**data, "storeParameters": {k: v for k, v in data["storeParameters"].items() if k not in NAMED or k == "path"}}
    return data


def author_of(who: Principal | None) -> str | None:
    """Who saved a version, as its history shows it: the verified user, else the key; None when nobody was asked (auth
    off, an import, the Python API)."""
    if who is None or who.subject == "in-process":
        return None
    if who.user_id:
        return f"user:{who.user_id}"
    return who.subject or who.role  # ("key <id>": the key's id, never its secret)


def _name(saved: Any, id: str) -> str:
    """What a vault key's description calls the resource: its name, else its id."""
    return str(saved.get("name", id)) if isinstance(saved, dict) else id
