"""Sources of a knowledge base: run (202), preview, run history, documents, retry, purge."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from eddi_rag.sources import folder

router = APIRouter(prefix="/ragstore/rags/{id}/sources/{sourceId}", tags=["sources"])


def _sync(request: Request):
    return request.app.state.runtime.sources


@router.post("/run", status_code=202)
def run(id: str, sourceId: str, request: Request) -> dict[str, Any]:
    """Start a run (one per source at a time: 409 while one is under way); follow it in ``runs``."""
    sync = _sync(request)
    _, source = sync.source(id, sourceId)
    if source.folder is not None:
        folder.check_folder(source.folder.path)  # a folder we may not read is a 400 now, not a FAILED run later
    return sync.start(id, sourceId).to_json()


@router.post("/preview")
def preview(id: str, sourceId: str, request: Request) -> dict[str, Any]:
    """What a run would do now: {add, update, unchanged, delete, failures, complete, notes}; embeds nothing."""
    return _sync(request).preview(id, sourceId)


@router.get("/runs")
def runs(id: str, sourceId: str, request: Request, limit: int = 50) -> list[dict[str, Any]]:
    """Run history, newest first."""
    return _sync(request).runs(id, sourceId, max(1, min(limit, 1000)))


@router.get("/documents")
def documents(id: str, sourceId: str, request: Request) -> list[dict[str, Any]]:
    """The source's documents in the knowledge base: {documentId, name, status: ok|failed, reason, updatedAt}."""
    return _sync(request).documents(id, sourceId)


@router.post("/retry")
def retry(id: str, sourceId: str, request: Request, documentId: str | None = None) -> dict[str, Any]:
    """Ingest the failed documents again (or only ``documentId``), without listing the source."""
    return _sync(request).retry(id, sourceId, documentId).to_json()


@router.delete("/documents")
def purge(id: str, sourceId: str, request: Request) -> dict[str, Any]:
    """Remove every document of this source from the knowledge base."""
    return {"kbId": id, "sourceId": sourceId, "removed": _sync(request).purge(id, sourceId)}
