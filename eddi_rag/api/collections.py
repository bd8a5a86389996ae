"""The collections API (the rag-providers spec): documents with pre-computed embeddings, metadata queries."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Body, Query
from fastapi.responses import Response

from eddi_rag.api.deps import Editor, Offset, RuntimeDep, Viewer
from eddi_rag.api.edge import ERROR_RESPONSES, Route
from eddi_rag.api.limits import IngestLimit
from eddi_rag.records.vector_collections import NAME_PATTERN

router = APIRouter(prefix="/collections", tags=["collections"], route_class=Route, responses=ERROR_RESPONSES)


# The bodies' JSON Schemas, for the OpenAPI document (the handlers check them and answer 400 naming the field).
CREATE_BODY = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string", "pattern": NAME_PATTERN}, "metadata": {"type": ["object", "null"]},
    "embedding_provider": {"type": ["string", "null"]}, "embedding_model": {"type": ["string", "null"]}}}
METADATA_BODY = {"type": "object", "required": ["metadata"], "properties": {"metadata": {"type": "object"}}}
DOCUMENTS_BODY = {"type": "object", "required": ["documents"], "properties": {"documents": {
    "type": "array", "minItems": 1, "items": {"type": "object", "required": ["text", "embedding"], "properties": {
        "id": {"type": ["string", "null"]}, "text": {"type": "string", "pattern": r"\S"},
        "embedding": {"type": "array", "minItems": 1, "items": {"type": "number"}},
        "metadata": {"type": ["object", "null"], "additionalProperties": {"type": ["string", "number", "boolean"]}}}}}}}


def documented_body(schema: dict[str, Any]) -> dict[str, Any]:
    return {"openapi_extra": {"requestBody": {"content": {"application/json": {"schema": schema}}}}}


@router.post("", status_code=201, **documented_body(CREATE_BODY))
def create(runtime: RuntimeDep, caller: Editor, body: dict[str, Any] = Body(...)):
    """``{name, embedding_provider?, embedding_model?, metadata?}``; the embedding fields are kept as metadata."""
    return runtime.collections.create(caller.tenant, body.get("name"), body.get("metadata"), body.get("embedding_provider"),
                                      body.get("embedding_model"))


@router.get("")
def all_collections(runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    return {"collections": runtime.collections.all(caller.tenant)}


@router.get("/{name}")
def get(name: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    return runtime.collections.get(caller.tenant, name)


@router.put("/{name}/metadata", **documented_body(METADATA_BODY))
def set_metadata(name: str, runtime: RuntimeDep, caller: Editor, body: dict[str, Any] = Body(...)) -> dict[str, Any]:
    """``{metadata: {...}}`` replaces the collection's metadata."""
    return {"success": True, **runtime.collections.set_metadata(caller.tenant, name, body.get("metadata"))}


@router.delete("/{name}", response_class=Response, responses={200: {"description": "Deleted (no body)", "content": {}}})
def delete(name: str, runtime: RuntimeDep, caller: Editor):
    runtime.collections.delete(caller.tenant, name)
    return Response(status_code=200)


@router.post("/{name}/documents", dependencies=[IngestLimit], **documented_body(DOCUMENTS_BODY))
def add_documents(name: str, runtime: RuntimeDep, caller: Editor, body: Any = Body(None)):
    documents = body.get("documents") if isinstance(body, dict) else None
    return runtime.collections.add(caller.tenant, name, documents)


@router.get("/{name}/documents")
def documents(name: str, runtime: RuntimeDep, caller: Viewer, where: str | None = None, limit: int | None = Query(None, ge=1, le=10_000),
              offset: Offset = 0) -> dict[str, Any]:
    """``{documents: [{id, text, metadata}], count, total}``: ``where`` in the one filter language
    (implicit AND, ``$in``, ``$or``…); no filter: the first 100; at most 1000 per page; id order."""
    return runtime.collections.documents(caller.tenant, name, where, limit, offset)


def document_json_parameters(spec: dict[str, Any]) -> None:
    """OpenAPI: ``where`` of a collection's document listing is a JSON object in the query string."""
    for parameter in spec["paths"]["/collections/{name}/documents"]["get"].get("parameters", []):
        if parameter["name"] == "where":
            parameter.pop("schema", None)
            parameter["content"] = {"application/json": {"schema": {"type": "object"}}}
