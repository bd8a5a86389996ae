"""Sources of a knowledge base: run (202), preview, run history, documents, retry, purge."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query

from eddi_rag.api.deps import Admin, Editor, RuntimeDep, Viewer, kb_of_tenant
from eddi_rag.api.edge import ERROR_RESPONSES, Route
from eddi_rag.sources import folder

router = APIRouter(prefix="/ragstore/rags/{id}/sources/{sourceId}", tags=["sources"], dependencies=[Depends(kb_of_tenant)],
                   route_class=Route, responses=ERROR_RESPONSES)


@router.post("/run", status_code=202)
def run(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Start a run (one per source at a time: 409 while one is under way); follow it in ``runs``."""
    _, source = runtime.sources.source(id, sourceId)
    if source.folder is not None:
        folder.check_folder(source.folder.path)  # a folder we may not read is a 400 now, not a FAILED run later
    return runtime.sources.start(id, sourceId).to_json()


@router.post("/preview")
def preview(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """What a run would do now: {add, update, unchanged, delete, failures, complete, notes}; embeds nothing."""
    return runtime.sources.preview(id, sourceId)


@router.get("/runs")
def runs(id: str, sourceId: str, runtime: RuntimeDep, caller: Viewer, limit: int = Query(50, ge=1, le=1000)) -> list[dict[str, Any]]:
    """Run history, newest first."""
    return runtime.sources.runs(id, sourceId, max(1, min(limit, 1000)))


@router.get("/documents")
def documents(id: str, sourceId: str, runtime: RuntimeDep, caller: Viewer) -> list[dict[str, Any]]:
    """The source's documents in the knowledge base: {documentId, name, status: ok|failed, reason, updatedAt}."""
    return runtime.sources.documents(id, sourceId)


@router.post("/retry")
def retry(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor, documentId: str | None = None) -> dict[str, Any]:
    """Ingest the failed documents again (or only ``documentId``), without listing the source."""
    return runtime.sources.retry(id, sourceId, documentId).to_json()


@router.delete("/documents")
def purge(id: str, sourceId: str, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """Remove every document of this source from the knowledge base."""
    return {"kbId": id, "sourceId": sourceId, "removed": runtime.sources.purge(id, sourceId)}
