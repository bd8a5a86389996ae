"""The REST API (FastAPI): EDDI's /ragstore/rags resource plus ingestion and query.

The other resource kinds the plugin reads (agents, workflows, httpcalls, llm configs) get the
same versioned CRUD under their EDDI paths.
"""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any, Literal

from fastapi import Body, FastAPI, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from eddi_rag import __version__, registry
from eddi_rag.api import sources, uploads
from eddi_rag.api.uploads import BadUploadError, PayloadTooLargeError, is_multipart, read_body, read_multipart
from eddi_rag.config import ConfigValidationError, load_schema, with_source_ids
from eddi_rag.ingest.loaders import UnreadableDocumentError, UnsupportedFileTypeError, detect
from eddi_rag.pipeline import InvalidQueryError, VectorDBUnavailableError
from eddi_rag.resources import (
    RESOURCE_TYPES,
    ResourceNotFoundError,
    ResourceRef,
    VersionConflictError,
)
from eddi_rag.runtime import Runtime
from eddi_rag.sources.folder import FolderNotAllowedError
from eddi_rag.sources.sync import SourceBusyError, SourceNotFoundError
from eddi_rag.stores.filters import FilterError


Expansion = Literal["none", "neighbors", "section"]


class QueryRequest(BaseModel):
    query: str = Field(min_length=1, max_length=2000)
    maxResults: int | None = Field(default=None, ge=1, le=1000)
    minScore: float | None = Field(default=None, ge=0, le=1)
    where: dict[str, Any] | None = None
    userId: str | None = None
    contextExpansion: Expansion | None = None  # default: the KB's
    maxContextChars: int | None = Field(default=None, ge=1)  # the passages grow within this budget


class RetrieveRequest(BaseModel):
    """The retrieve contract: validation of the query itself is the contract's (InvalidQueryError → 400)."""

    query: str
    maxChunks: int = Field(default=5, ge=1, le=1000)
    minRelevance: float = Field(default=0.6, ge=0, le=1)
    userId: str | None = None
    where: dict[str, Any] | None = None
    contextExpansion: Expansion | None = None  # default: the KB's


class DocumentsRequest(BaseModel):
    documents: list[Any] = Field(min_length=1)


# Errors whose answer is {"error": message}, and their status: one table for the whole API.
STATUS: dict[type[Exception], int] = {
    ResourceNotFoundError: 404, SourceNotFoundError: 404,
    FilterError: 400, InvalidQueryError: 400, BadUploadError: 400, FolderNotAllowedError: 400,
    SourceBusyError: 409,
    PayloadTooLargeError: 413,
    UnsupportedFileTypeError: 415,
    UnreadableDocumentError: 422,
    VectorDBUnavailableError: 503,
}


def _created(ref: ResourceRef, status: int = 201) -> Response:
    return Response(status_code=status, headers={"Location": ref.uri, "X-Resource-URI": ref.uri})


def create_app(runtime: Runtime, max_upload_bytes: int | None = None) -> FastAPI:
    """``max_upload_bytes``: the largest document body accepted (default: EDDI_RAG_MAX_UPLOAD_MB, 50 MB)."""
    @asynccontextmanager
    async def lifespan(app: FastAPI):
        runtime.jobs.start()
        runtime.scheduler.start()
        yield
        runtime.scheduler.stop()
        runtime.jobs.stop()

    app = FastAPI(title="eddi-rag", version=__version__, lifespan=lifespan)
    app.state.runtime = runtime
    app.state.max_upload_bytes = max_upload_bytes or uploads.max_upload_bytes()

    @app.exception_handler(VersionConflictError)
    async def conflict(_: Request, e: VersionConflictError):
        return JSONResponse({"error": str(e), "currentVersion": e.current}, status_code=409)

    @app.exception_handler(ConfigValidationError)
    async def invalid(_: Request, e: ConfigValidationError):
        return JSONResponse({"error": "invalid configuration", "errors": e.errors}, status_code=400)

    async def error_body(_: Request, e: Exception):
        status = next(STATUS[c] for c in type(e).__mro__ if c in STATUS)  # subclasses answer as their base
        return JSONResponse({"error": str(e)}, status_code=status)

    for error in STATUS:
        app.add_exception_handler(error, error_body)

    @app.get("/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "version": __version__}

    @app.get("/providers", tags=["providers"])
    def providers() -> dict[str, Any]:
        """Registered stores and embedding providers with their capabilities."""
        return {kind: [{k: v for k, v in registry.describe(group, n).items() if k != "schema"} for n in registry.names(group)]
                for kind, group in registry.KINDS.items()}

    @app.get("/providers/{kind}/{name}/schema", tags=["providers"])
    def provider_schema(kind: str, name: str) -> dict[str, Any]:
        """The JSON Schema of storeParameters (kind=stores) or embeddingParameters (kind=embeddings)."""
        if kind not in registry.KINDS:
            raise HTTPException(404, f"unknown provider kind {kind!r}; use stores or embeddings")
        try:
            described = registry.describe(registry.KINDS[kind], name)
        except registry.UnknownProviderError as e:
            raise HTTPException(404, str(e)) from e
        if not described["available"]:
            raise HTTPException(503, described["error"])
        return described["schema"]

    @app.get("/ragstore/rags/{id}/health")
    def kb_health(id: str) -> dict[str, Any]:
        return runtime.health(id)

    @app.get("/ragstore/rags/jsonSchema")
    def json_schema() -> dict[str, Any]:
        return load_schema()

    @app.post("/ragstore/rags/{id}/ingest", status_code=202)
    async def ingest(id: str, request: Request, version: int = 0, documentName: str = "unnamed", kbId: str | None = None):
        """A document as the raw body (text, or a file with its Content-Type; ``documentName``'s
        extension helps decide its type), or ``multipart/form-data`` with one or more ``file``
        parts (one ingestion each). 413 over the upload limit, 415 for an unsupported type."""
        runtime.rag_config(id, version)  # 404 for an unknown config or version
        version = version or runtime.resources.current_version("rags", id)
        limit = app.state.max_upload_bytes
        if is_multipart(request):
            jobs = [(u.name, runtime.jobs.submit(id, version, u.name, u.data, u.format))
                    for u in await read_multipart(request, limit)]
            return {"kbId": id, "ingestions": [{"ingestionId": j.id, "documentName": name, "status": j.status}
                                               for name, j in jobs]}
        if not documentName.strip():
            raise HTTPException(400, "documentName must not be blank")
        data = await read_body(request, limit)
        if not data.strip():
            raise HTTPException(400, "the request body (the document) is empty")
        fmt = detect(data, request.headers.get("content-type"), documentName)
        job = runtime.jobs.submit(id, version, documentName, data, fmt)
        return {"ingestionId": job.id, "kbId": id, "status": job.status}

    @app.get("/ragstore/rags/{id}/ingestion/{ingestion_id}/status")
    def ingestion_status(id: str, ingestion_id: str) -> dict[str, Any]:
        job = runtime.jobs.status(ingestion_id)
        if job is None or job.kb_id != id:
            raise HTTPException(404, f"no ingestion {ingestion_id} for knowledge base {id}")
        return job.to_json()

    @app.post("/ragstore/rags/{id}/query")
    def query(id: str, body: QueryRequest) -> dict[str, Any]:
        config = runtime.rag_config(id)
        hits = runtime.retriever.search(id, config, body.query, body.maxResults, body.minScore, body.where, body.userId)
        passages = runtime.retriever.passages(id, config, hits, body.contextExpansion, body.userId, body.maxContextChars)
        text_of = {h.id: p.text for p in passages for h in p.hits}
        return {"kbId": id, "name": config.name, "query": body.query,
                "contextExpansion": body.contextExpansion or config.contextExpansion,
                "results": [{**h.to_json(), "passage": text_of.get(h.id)} for h in hits],
                "passages": [p.to_json() for p in passages]}

    @app.post("/ragstore/rags/{id}/retrieve")
    def retrieve(id: str, body: RetrieveRequest) -> dict[str, Any]:
        """RAGContext: chunks above minRelevance, empty when their average is below it; cached 5 minutes."""
        return runtime.pipeline.retrieve(body.query, id, body.maxChunks, body.minRelevance, user_id=body.userId,
                                         where=body.where, expansion=body.contextExpansion).to_json()

    @app.post("/ragstore/rags/{id}/documents")
    def ingest_documents(id: str, body: DocumentsRequest) -> dict[str, Any]:
        """Upsert documents by document_id, synchronously: an IngestionResult with per-document errors."""
        return runtime.pipeline.ingest(body.documents, id).to_json()

    @app.post("/ragstore/rags/{id}/purge")
    def purge(id: str) -> dict[str, Any]:
        """Delete the chunks whose time to live has passed."""
        return {"kbId": id, "removed": runtime.purge_expired(id)}

    app.include_router(sources.router)
    for kind, (_, store, collection) in RESOURCE_TYPES.items():
        _resource_routes(app, runtime, kind, f"/{store}/{collection}")
    return app


def _resource_routes(app: FastAPI, runtime: Runtime, kind: str, base: str) -> None:
    resources = runtime.resources
    validate = runtime.validate_rag if kind == "rags" else (lambda data: data)
    prepare = with_source_ids if kind == "rags" else (lambda data: data)  # what is saved
    tag = [kind]

    def check(data: Any) -> dict[str, Any]:
        if not isinstance(data, dict):
            raise ConfigValidationError([{"path": "$", "message": "a resource must be a JSON object", "value": data}])
        validate(data)
        return prepare(data)

    @app.get(f"{base}/descriptors", tags=tag)
    def descriptors(filter: str = "", index: int = Query(0, ge=0), limit: int = Query(20, ge=1, le=1000)):
        return [d.__dict__ for d in resources.descriptors(kind, filter, index, limit)]

    @app.post(base, status_code=201, tags=tag)
    def create(data: Any = Body(...)):
        return _created(resources.create(kind, check(data)))

    @app.get(f"{base}/{{id}}", tags=tag)
    def read(id: str, version: int = Query(0, ge=0)):
        return resources.read(kind, id, version)

    @app.put(f"{base}/{{id}}", tags=tag)
    def update(id: str, version: int = Query(..., ge=1), data: Any = Body(...)):
        ref = resources.update(kind, id, version, check(data))
        if kind == "rags":
            runtime.stores.evict(id)
        return _created(ref, 200)

    @app.post(f"{base}/{{id}}", status_code=201, tags=tag)
    def duplicate(id: str, version: int = Query(0, ge=0)):
        return _created(resources.duplicate(kind, id, version))

    @app.delete(f"{base}/{{id}}", tags=tag)
    def delete(id: str, version: int = Query(0, ge=0), permanent: bool = False):
        if kind == "rags" and permanent:
            try:
                runtime.drop_knowledge_base(id)
            except ResourceNotFoundError:
                pass  # already soft-deleted: its config is gone, nothing we can open to drop
        resources.delete(kind, id, version, permanent)
        return Response(status_code=200)
