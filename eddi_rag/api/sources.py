"""Sources of a knowledge base, with EDDI's verbs and bodies: run (202 ``{status: "started", sourceId}``),
preview (its IngestionReport), runs (its IngestionRun, ``limit`` 20, at most 200), purge (forgets the
source's state and keeps its chunks: ``{status: "purged", sourceId}``), the files of an upload source; and
ours: the source's documents, retry, its change cursor (read, reset), a permission sync, its status and a test of
its connection."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from starlette.datastructures import UploadFile

from eddi_rag.api.deps import Editor, RuntimeDep, Viewer, curators_only, kb_of_tenant, readable
from eddi_rag.api.edge import ERROR_RESPONSES, Route
from eddi_rag.api.uploads import MAX_FILES, BadUploadError, is_multipart

router = APIRouter(prefix="/ragstore/rags/{id}/sources/{sourceId}", tags=["sources"], dependencies=[Depends(kb_of_tenant)],
                   route_class=Route, responses=ERROR_RESPONSES)

@router.post("/run", status_code=202)
def run(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Start a run (409 ``{error, sourceId}`` while one is under way or when the source is disabled);
    follow it in ``runs``."""
    started = runtime.sources.start(id, sourceId)
    return {"status": "started", "sourceId": started.sourceId, "runId": started.runId}


@router.post("/preview")
def preview(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """What a run would do now, embedding nothing: EDDI's IngestionReport, and the documents behind each count
    (``add``, ``update``, ``unchanged``, ``delete``, ``failures``); 429 beyond three previews at once."""
    return runtime.sources.preview(id, sourceId)


@router.post("/sync-permissions", status_code=202)
def sync_permissions(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """List again who may read each document of a source that keeps its own permissions (sharepoint), and rewrite
    the chunks' ACLs that changed, without reading or embedding anything; follow it in ``runs`` (kind
    ``permissions``). 400 for a source whose documents are read by ``settings.acl``; 409 while the source is held."""
    started = runtime.sources.start_permissions(id, sourceId)
    return {"status": "started", "sourceId": started.sourceId, "runId": started.runId}


@router.get("/status")
def status(id: str, sourceId: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """What the source needs, its cursor, its last run and the next one due, and its last permission sync (of a
    knowledge base that reads by permissions, for its editors: a run counts and names every document)."""
    curators_only(runtime, id, caller, "the sources' runs")
    return runtime.sources.status(id, sourceId)


@router.post("/test")
def test_connection(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Whether the source can be read now (credentials, endpoint, folder): ``{ok: true}`` or ``{ok: false, error}``;
    nothing is ingested."""
    return runtime.sources.test(id, sourceId)


@router.post("/reset-cursor")
def reset_cursor(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """The next run lists the source in full instead of resuming from its change cursor (``{status: "reset",
    sourceId}``; what was ingested stays). 409 while a run holds the source."""
    return runtime.sources.reset_cursor(id, sourceId)


@router.get("/cursor")
def cursor(id: str, sourceId: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """Where the source's next run resumes: ``{sourceId, cursor}`` (null: it lists the source in full)."""
    curators_only(runtime, id, caller, "the sources' cursors")
    return {"sourceId": sourceId, "cursor": runtime.sources.cursor(id, sourceId)}


@router.get("/runs")
def runs(id: str, sourceId: str, runtime: RuntimeDep, caller: Viewer, limit: int = Query(20, ge=1)) -> list[dict[str, Any]]:
    """Run history, newest first (``limit`` above 200 reads as 200); of a knowledge base that reads by permissions, for
    its editors."""
    curators_only(runtime, id, caller, "the sources' runs")
    return runtime.sources.runs(id, sourceId, limit)


@router.get("/documents")
def documents(id: str, sourceId: str, runtime: RuntimeDep, caller: Viewer) -> list[dict[str, Any]]:
    """The source's documents in the knowledge base: {documentId, name, status: ok|failed, reason, updatedAt, missedRuns};
    a viewer of a knowledge base whose audience is OWNER or DOCUMENT_ACL sees those stored that it may read."""
    return runtime.sources.documents(id, sourceId, readable(runtime, id, caller))


@router.post("/retry")
def retry(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor, documentId: str | None = None) -> dict[str, Any]:
    """Ingest the failed documents again (or only ``documentId``), without listing the source."""
    return runtime.sources.retry(id, sourceId, documentId).to_json()


@router.delete("/documents")
def purge(id: str, sourceId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Forget what the source has ingested, as EDDI does: its chunks stay retrievable while the next run
    ingests again what it finds; what it no longer finds leaves after ``tombstoneAfterMissedRuns`` complete
    runs. 409 while a run holds the source."""
    return runtime.sources.purge(id, sourceId)


@router.post("/files", responses={200: {"description": "{stored, rejected}: at least one file stored"},
                                  400: {"description": "{stored: [], rejected}: none stored"}})
async def store_files(id: str, sourceId: str, request: Request, runtime: RuntimeDep, caller: Editor) -> JSONResponse:
    """Keep files in an upload source (``multipart/form-data``, parts named ``files``), each accepted or refused
    on its own; running the source ingests them. 409: the source is not of type upload."""
    runtime.sources.uploads.source_of(id, sourceId)  # 409 before reading a body meant for another source type
    if not is_multipart(request):
        raise BadUploadError("send the files as multipart/form-data, each in a part named 'files'")
    form = await request.form(max_files=MAX_FILES, max_fields=100)
    try:
        parts = [f for f in form.getlist("files") + form.getlist("file") if isinstance(f, UploadFile)]
        if not parts:
            raise BadUploadError("the multipart body has no 'files' part")
        files = [(f.filename or "file", await f.read(), f.content_type) for f in parts]
    finally:
        await form.close()
    result = runtime.sources.uploads.store(id, sourceId, files)
    return JSONResponse(result, status_code=200 if result["stored"] else 400)


@router.get("/files")
def list_files(id: str, sourceId: str, runtime: RuntimeDep, caller: Viewer) -> list[dict[str, Any]]:
    """The files the source holds: {fileId, fileName, contentType, size, sha256, uploadedAt, status:
    Indexed | Changed | Not indexed}; of a knowledge base that reads by permissions, for its editors."""
    curators_only(runtime, id, caller, "the sources' files")
    return runtime.sources.uploads.list(id, sourceId)


@router.delete("/files/{fileId}")
def delete_file(id: str, sourceId: str, fileId: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Remove a file and the chunks it produced, now (409 while a run holds the source)."""
    return runtime.sources.uploads.delete(id, sourceId, fileId)
