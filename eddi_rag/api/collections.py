"""The collections API (the rag-providers spec): documents with pre-computed embeddings, metadata queries."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import Response

from eddi_rag.api.deps import Editor, Offset, RuntimeDep, Viewer
from eddi_rag.api.edge import ERROR_RESPONSES, Route
from eddi_rag.api.limits import IngestLimit

router = APIRouter(prefix="/collections", tags=["collections"], route_class=Route, responses=ERROR_RESPONSES)


@router.post("", status_code=201)
def create(runtime: RuntimeDep, caller: Editor, body: dict[str, Any] = Body(...)):
    """``{name, embedding_provider?, embedding_model?, metadata?}``; the embedding fields are kept as metadata."""
    return runtime.collections.create(body.get("name"), body.get("metadata"), body.get("embedding_provider"),
                                      body.get("embedding_model"), tenant=caller.tenant)


@router.get("")
def all_collections(runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    return {"collections": runtime.collections.all(caller.tenant)}


@router.get("/{name}")
def get(name: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    return runtime.collections.get(name, caller.tenant)


@router.put("/{name}/metadata")
def set_metadata(name: str, runtime: RuntimeDep, caller: Editor, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    """``{metadata: {...}}`` replaces the collection's metadata."""
    return {"success": True, **runtime.collections.set_metadata(name, body.get("metadata"), caller.tenant)}


@router.delete("/{name}")
def delete(name: str, runtime: RuntimeDep, caller: Editor):
    runtime.collections.delete(name, caller.tenant)
    return Response(status_code=200)


@router.post("/{name}/documents", dependencies=[IngestLimit])
def add_documents(name: str, runtime: RuntimeDep, caller: Editor, body: Any = Body(None)):
    documents = body.get("documents") if isinstance(body, dict) else None
    return runtime.collections.add(name, documents, caller.tenant)


@router.get("/{name}/documents")
def documents(name: str, runtime: RuntimeDep, caller: Viewer, where: str | None = None, limit: int | None = Query(None, ge=1, le=10_000),
              offset: Offset = 0) -> dict[str, Any]:
    """``{documents: [{id, text, metadata}], count, total}``: ``where`` in the one filter language
    (implicit AND, ``$in``, ``$or``…); no filter: the first 100; at most 1000 per page; id order."""
    return runtime.collections.documents(name, where, limit, offset, caller.tenant)
