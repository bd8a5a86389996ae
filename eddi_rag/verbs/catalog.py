"""What a tenant has saved, read: a resource by id and version, every resource of a kind (paged: no face stops
at a cap of its own), and an agent in and out as an EDDI export. Another tenant's resource does not exist for
the caller. Writing is ``saving``; a knowledge base's configuration as it is used is ``knowledge_bases``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from eddi_rag.resource_types import Descriptor, ResourceNotFoundError
from eddi_rag.resources import ResourceStore
from eddi_rag.verbs import sealing
from eddi_rag.verbs.eddi_export import export_agent
from eddi_rag.verbs.eddi_import import ImportReport, import_agent_export
from eddi_rag.verbs.knowledge_bases import KnowledgeBases


class Catalog:
    def __init__(self, resources: ResourceStore, kbs: KnowledgeBases):
        self.resources, self.kbs = resources, kbs

    def own(self, kind: str, id: str, tenant: str | None) -> None:
        """Raises ResourceNotFoundError unless ``kind/id`` exists (a soft-deleted one too) and (``tenant`` given) is
        ``tenant``'s: the check before any change a caller asks for. (Reads pass ``tenant`` to the store instead.)"""
        if tenant is not None and self.resources.tenant_of(kind, id) != tenant:
            raise ResourceNotFoundError(f"{kind}/{id} not found")

    def read(self, kind: str, id: str, version: int = 0, tenant: str | None = None) -> dict[str, Any]:
        """The resource as saved (version 0: the current one)."""
        return self.resources.read(kind, id, version, tenant)

    def shown(self, kind: str, id: str, version: int = 0, tenant: str | None = None) -> dict[str, Any]:
        """The resource as a face shows it: a secret typed into it before secrets were sealed as ``${vault:REDACTED}``
        (verbs.sealing; saved back, the stored value stays)."""
        return sealing.shown(self.read(kind, id, version, tenant), kind)

    def versions(self, kind: str, id: str, tenant: str | None = None) -> list[dict[str, Any]]:
        """Each version, newest first, with when and by whom it was saved: {version, createdOn, author}."""
        return self.resources.versions(kind, id, tenant)

    def current_version(self, kind: str, id: str, tenant: str | None = None) -> int:
        return self.resources.current_version(kind, id, tenant)

    def exists(self, kind: str, id: str, tenant: str | None = None) -> bool:
        return self.resources.exists(kind, id, tenant=tenant)

    def page(self, kind: str, tenant: str | None, filter: str = "", index: int = 0, limit: int = 20) -> list[Descriptor]:
        """One page of descriptors, newest first (EDDI's ``/descriptors``: ``index`` counts pages of ``limit``)."""
        return self.resources.descriptors(kind, filter, index, limit, tenant)

    def every(self, kind: str, tenant: str | None, filter: str = "") -> Iterator[Descriptor]:
        """Every resource of ``kind`` of ``tenant`` (None: every tenant's), newest first, read a page at a time."""
        return self.resources.every(kind, tenant, filter)

    def export_agent(self, agent_id: str, tenant: str | None = None) -> bytes:
        """The agent, its workflows and the configurations they name, as EDDI's export zip."""
        return export_agent(self.resources, agent_id, tenant)

    def import_agents(self, data: bytes, tenant: str) -> ImportReport:
        """Every agent of an EDDI export zip into ``tenant``, each configuration through the save rules."""
        return import_agent_export(self.resources, data, tenant, self.kbs.checked)
