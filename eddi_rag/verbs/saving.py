"""Saving resources, whoever saves them (REST, the Manager, a bundle, the memory KBs): every write
passes ``Configs.checked``; a knowledge base's update reopens its store and, as EDDI's does, takes away
what a source dropped from ``sources[]`` (or given another ``type``) brought in; its delete stops its
ingestions and (permanent) drops its chunks and its sources' state and files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddi_rag.config import ConfigValidationError, RagConfiguration
from eddi_rag.ingest.jobs import IngestionQueue
from eddi_rag.resources import DEFAULT_TENANT, ResourceNotFoundError, ResourceRef, ResourceStore
from eddi_rag.verbs.configs import Configs
from eddi_rag.verbs.documents import Documents


class Saving:
    def __init__(self, resources: ResourceStore, configs: Configs, documents: Documents, jobs: IngestionQueue,
                 source_removed: Callable[[str, RagConfiguration, str, bool], None] = lambda *a: None):
        """``source_removed(kb_id, config before, source id, its chunks too)``: forget a source's state and files
        (SourceSync.forget_source)."""
        self.resources, self.configs, self.documents, self.jobs = resources, configs, documents, jobs
        self.source_removed = source_removed

    def create(self, kind: str, data: Any, tenant: str = DEFAULT_TENANT, id: str | None = None,
               description: str = "") -> ResourceRef:
        """Version 1 of a new resource (``id``: keep this one; it must be unused)."""
        return self.resources.create(kind, self.configs.checked(kind, data, tenant), description=description, id=id,
                                     tenant=tenant)

    def update(self, kind: str, id: str, version: int, data: Any, tenant: str = DEFAULT_TENANT) -> ResourceRef:
        """A new version; ``version`` must be the current one (VersionConflictError otherwise)."""
        return self._update_checked(kind, id, version, self.configs.checked(kind, data, tenant))

    def put(self, kind: str, id: str, data: Any, tenant: str = DEFAULT_TENANT) -> ResourceRef:
        """``id`` holding ``data``: created, or a new version when its current one differs (else unchanged)."""
        saved = self.configs.checked(kind, data, tenant)
        try:
            current = self.resources.current_version(kind, id, tenant=tenant)
        except ResourceNotFoundError:
            return self.resources.create(kind, saved, id=id, tenant=tenant)
        if self.resources.read(kind, id, current) == saved:
            return ResourceRef(kind, id, current)
        return self._update_checked(kind, id, current, saved)

    def _update_checked(self, kind: str, id: str, version: int, saved: dict[str, Any]) -> ResourceRef:
        before = self._config(id) if kind == "rags" else None
        ref = self.resources.update(kind, id, version, saved)
        if kind == "rags":
            self.documents.forget_store(id)
            if before is not None:
                kept = {s.effective_id: s.type for s in RagConfiguration.model_validate(saved).sources}  # (checked above)
                for source in before.sources:
                    if kept.get(source.effective_id) != source.type:  # dropped, or another type: gone with its chunks
                        self.source_removed(id, before, source.effective_id, True)
        return ref

    def _config(self, id: str) -> RagConfiguration | None:
        try:
            return self.configs.get(id)
        except (ResourceNotFoundError, ConfigValidationError):
            return None

    def duplicate(self, kind: str, id: str, version: int = 0) -> ResourceRef:
        return self.resources.duplicate(kind, id, version)

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
                self.jobs.let_go(id)  # the documents' kept files
                if before is not None:
                    for source in before.sources:
                        self.source_removed(id, before, source.effective_id, False)  # (the chunks went with the store)
        self.resources.delete(kind, id, version, permanent)
