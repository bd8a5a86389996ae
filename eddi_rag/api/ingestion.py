"""Documents into a knowledge base: files and text (queued jobs, listed and retried), the ingest
contract, the KB's documents (list, delete one), purge."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from pydantic import Field

from eddi_rag.api.deps import Admin, Editor, RuntimeDep, Version, Viewer, kb_of_tenant, readable
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.api.limits import IngestLimit
from eddi_rag.api.uploads import is_multipart, read_body, read_multipart
from eddi_rag.common.principals import ACL_PATTERN, PRINCIPAL_PATTERN
from eddi_rag.verbs.ingesting import PAGE_MAX_WIDTH, PAGE_MIN_WIDTH, PAGE_WIDTH

router = APIRouter(prefix="/ragstore/rags/{id}", tags=["ingestion"], dependencies=[Depends(kb_of_tenant)], route_class=Route, responses=ERROR_RESPONSES)


ACL_HELP = ("Who may read the document (a knowledge base with audience DOCUMENT_ACL): principals separated by commas, "
            "e.g. group:finance,user:bob,deny:user:carol. Without it, a document ingested again keeps its ACL.")


class DocumentsRequest(RequestBody):
    documents: list[Any] = Field(min_length=1)


INGEST_BODY = {"required": True, "description": "The document: raw text (shown here), or a file's bytes with its Content-Type "
               "(PDF, DOCX, PPTX, XLSX, CSV, HTML, Markdown...), or multipart/form-data with `file` parts.",
               "content": {"text/plain": {"schema": {"type": "string", "minLength": 1, "pattern": r"\S"}}}}


@router.post("/ingest", status_code=202, dependencies=[IngestLimit], openapi_extra={"requestBody": INGEST_BODY})
async def ingest(id: str, request: Request, runtime: RuntimeDep, caller: Editor, version: Version = 0,
                 documentName: Annotated[str | None, Query(min_length=1, max_length=1000, pattern=r"\S")] = None,
                 replace: bool = False, kbId: str | None = None,
                 acl: Annotated[str | None, Query(max_length=100_000, pattern=ACL_PATTERN, description=ACL_HELP)] = None):
    """A document as the raw body (text, or a file with its Content-Type; ``documentName``'s
    extension helps decide its type; default ``unnamed``), or ``multipart/form-data`` with one or
    more ``file`` parts (one ingestion each) and maybe an ``acl`` field. As in EDDI, an ingestion appends: its chunks
    land beside those of earlier ingestions of the same name (``documentId`` ``<name>#<ingestionId>``);
    ``replace=true`` replaces the document of that name instead (it needs a ``documentName``, or file
    names). ``acl``: who may read it (docs/permissions.md). 413 over the upload limit, 415 for an unsupported type."""
    if kbId is not None and kbId != id:  # as EDDI since 2026-10: the path names the knowledge base, nothing else may
        raise HTTPException(400, f"kbId {kbId!r} names another knowledge base than the path's ({id}): leave it out, or "
                                 "send the document to that knowledge base's own path; nothing was ingested")
    if replace and documentName is None and not is_multipart(request):
        raise HTTPException(400, "replace=true needs a documentName: the document whose chunks it replaces")
    version = runtime.knowledge_bases.version(id, version)  # 404 for an unknown config or version, before the body is read
    limit = request.app.state.max_upload_bytes
    if is_multipart(request):
        with runtime.ingesting.refusals_kept(id, version, "(multipart upload)"):
            uploads = await read_multipart(request, limit, runtime.ingesting.detect)
        jobs = [(u.name, runtime.ingesting.submit(id, u.name, u.data, version=version, fmt=u.format, replace=replace,
                                                  acl=acl if acl is not None else u.acl))
                for u in uploads]
        return {"kbId": id, "ingestions": [{"ingestionId": j.id, "documentName": name, "status": j.status}
                                           for name, j in jobs]}
    name = "unnamed" if documentName is None else documentName
    with runtime.ingesting.refusals_kept(id, version, name):
        data = await read_body(request, limit)
    job = runtime.ingesting.submit(id, name, data, request.headers.get("content-type"), version, replace=replace, acl=acl)
    return {"ingestionId": job.id, "kbId": id, "status": job.status}


@router.post("/reembed", status_code=202, dependencies=[IngestLimit])
def reembed(id: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Re-embed every chunk with the current configuration's model (after a change of provider, model or
    dimensions): a job, followed like an ingestion (its progress counts chunks)."""
    job = runtime.ingesting.reembed(id)
    return {"ingestionId": job.id, "kbId": id, "status": job.status}


class ChunkSwitch(RequestBody):
    enabled: bool


@router.get("/chunks")
def document_chunks(id: str, runtime: RuntimeDep, caller: Viewer,
                    documentId: Annotated[str, Query(min_length=1, max_length=2000)]) -> dict[str, Any]:
    """One document's chunks in order ({id, position, where, text, enabled}), who may read it (``acl``), and whether its
    file is kept (``reparsable``)."""
    chunks = runtime.documents.chunks(id, documentId, caller.user_id, readable(runtime, id, caller))
    return {"kbId": id, "documentId": documentId, "chunks": chunks, "acl": chunks[0].get("acl"),
            "reparsable": runtime.ingesting.reparsable(id, documentId)}


@router.get("/page", response_class=Response, responses={200: {"content": {"image/png": {}}}})
def page_image(id: str, runtime: RuntimeDep, caller: Viewer, documentId: Annotated[str, Query(min_length=1, max_length=2000)],
               page: Annotated[int, Query(ge=1, le=100_000)],
               width: Annotated[int, Query(ge=PAGE_MIN_WIDTH, le=PAGE_MAX_WIDTH)] = PAGE_WIDTH) -> Response:
    """Page ``page`` of a PDF or image document as a PNG, to draw its chunks' ``boxes`` on (fractions of the page,
    origin top left). 404 for a document the caller cannot see, a page it does not have, or a format without
    pages; 409 when its file was not kept."""
    runtime.documents.chunks(id, documentId, caller.user_id, readable(runtime, id, caller))  # 404 unless the caller sees it
    image = runtime.ingesting.page_image(id, documentId, page, width)
    return Response(image, media_type="image/png", headers={"Cache-Control": "private, max-age=60"})


@router.patch("/chunks/{chunk_id}")
def switch_chunk(id: str, chunk_id: str, body: ChunkSwitch, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Switch a chunk off (no search finds it, no passage shows it) or on again."""
    return runtime.documents.enable(id, chunk_id, body.enabled, caller.user_id)


@router.post("/reparse", status_code=202, dependencies=[IngestLimit])
def reparse(id: str, runtime: RuntimeDep, caller: Editor,
            documentId: Annotated[str | None, Query(min_length=1, max_length=2000)] = None) -> dict[str, Any]:
    """Ingest a document's kept file again with the current configuration (its chunks replaced); without
    ``documentId``, every document whose file is kept (one ingestion each, with progress): {ingestions, notKept}."""
    if documentId is None:
        jobs = runtime.ingesting.reparse_all(id)
        stored = {d["documentId"] for d in runtime.documents.list(id)["documents"]}
        return {"kbId": id, "ingestions": [{"ingestionId": j.id, "documentId": d, "status": j.status} for d, j in jobs],
                "notKept": sorted(stored - {d for d, _ in jobs})}
    job = runtime.ingesting.reparse(id, documentId)
    return {"ingestionId": job.id, "kbId": id, "documentId": documentId, "status": job.status}


@router.get("/ingestion/{ingestion_id}/status")
def ingestion_status(id: str, ingestion_id: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """One ingestion; of a knowledge base that reads by permissions, a viewer's only when it may read the document."""
    return runtime.ingesting.job(id, ingestion_id, readable(runtime, id, caller)).to_json()


@router.get("/ingestions")
def ingestions(id: str, runtime: RuntimeDep, caller: Viewer, limit: int = Query(100, ge=1, le=1000)) -> list[dict[str, Any]]:
    """The KB's ingestions, newest first: pending, processing (with progress), completed, failed: reason. A viewer of a
    knowledge base whose audience is OWNER or DOCUMENT_ACL sees those of the stored documents it may read."""
    return [j.to_json() for j in runtime.ingesting.history(id, limit, readable(runtime, id, caller))]


@router.post("/ingestion/{ingestion_id}/retry", status_code=202)
def retry_ingestion(id: str, ingestion_id: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Queue a failed or cancelled ingestion again, with the document it was given (409 otherwise)."""
    return runtime.ingesting.retry(id, ingestion_id).to_json()


@router.delete("/ingestion/{ingestion_id}")
def cancel_ingestion(id: str, ingestion_id: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Cancel a pending ingestion, or stop a processing one at its next step (nothing of it is
    written); 409 for one that already completed, failed or was cancelled."""
    return runtime.ingesting.cancel(id, ingestion_id).to_json()


@router.get("/documents")
def documents(id: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """The KB's documents with their chunk counts: {documents: [{documentId, source, chunks, ingestedAt, acl}], complete};
    a credential bound to a user sees the shared documents and its own, as its search does; a viewer of a knowledge base
    whose audience is OWNER or DOCUMENT_ACL sees only what it may read (docs/permissions.md)."""
    return runtime.documents.list(id, user_id=caller.user_id, readable=readable(runtime, id, caller))


class DocumentAcl(RequestBody):
    acl: list[Annotated[str, Field(max_length=300, pattern=PRINCIPAL_PATTERN)]] = Field(
        max_length=1000, description="Who may read the document: principals such as group:finance, user:bob, deny:user:carol.")


@router.patch("/documents/{document_id:path}")
def set_document_acl(id: str, document_id: str, body: DocumentAcl, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Who may read one document from now on (``{"acl": ["group:finance", "deny:user:carol"]}``): its chunks' ACL is
    rewritten at once, without embedding anything again; the next search honours it. ``warnings``: the groups named that
    no user of the tenant's group directory is in (a misspelt ``group:finanse``; a token's own groups are not listed)."""
    done = runtime.documents.set_acl(id, document_id, body.acl)
    return {**done, "warnings": unknown_groups(runtime, caller.tenant, done["acl"])}


def unknown_groups(runtime: Any, tenant: str, acl: list[str]) -> list[str]:
    """What to say of each group ``acl`` names that nobody of the tenant's group directory is in."""
    known = {g for groups in runtime.groups.members(tenant).values() for g in groups}
    named = [p.removeprefix("deny:").removeprefix("group:") for p in acl if p.removeprefix("deny:").startswith("group:")]
    return [f"group:{g}: no user of this tenant's group directory is in it (a misspelling? a token's own groups are not "
            "listed there)" for g in named if g not in known]


@router.delete("/documents/{document_id:path}")
def delete_document(id: str, document_id: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    removed = runtime.documents.delete(id, document_id, caller.user_id)  # a user-bound key: shared or its own
    if not removed:
        raise HTTPException(404, f"knowledge base {id} has no document {document_id!r}")
    return {"kbId": id, "documentId": document_id, "removed": removed}


@router.post("/documents", dependencies=[IngestLimit])
def ingest_documents(id: str, body: DocumentsRequest, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Upsert documents by document_id, synchronously: an IngestionResult with per-document errors.
    A credential bound to a user ingests as that user; only one acting for users may name another."""
    documents = [{**d, "user_id": caller.user_for(d.get("user_id"))} if isinstance(d, dict) and
                 (caller.user_id or d.get("user_id") is not None) else d for d in body.documents]
    return runtime.ingesting.batch(documents, id).to_json()


@router.post("/purge")
def purge(id: str, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """Delete the chunks whose time to live has passed."""
    return {"kbId": id, "removed": runtime.documents.purge_expired(id)}
