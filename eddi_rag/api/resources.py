"""EDDI's versioned resources: /ragstore/rags and the other kinds the plugin reads (agents,
workflows, httpcalls, llm configs), each with the same CRUD, descriptors and URIs."""

from __future__ import annotations

import binascii
import functools
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ConfigDict, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from eddi_rag.api.deps import MAX_VERSION, Editor, Offset, RuntimeDep, Version, Viewer
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.api.uploads import BadUploadError, too_large
from eddi_rag.auth import Principal
from eddi_rag.auth.http import check_role
from eddi_rag.resource_types import RESOURCE_TYPES, ResourceRef, parse_uri
from eddi_rag.verbs.knowledge_bases import configuration_schema, provider_entry_schema


def _created(ref: ResourceRef, status: int = 201, runtime: Any = None) -> Response:
    """EDDI's answer to a write (the new version's URI in Location; EDDI clients read nothing else); a knowledge
    base's also says whether it can answer as saved: {warnings: [{check, detail, fix}]} (a secret reference that does
    not resolve yet: saved all the same, since an EDDI client may store the key after it; a store kept in memory; no
    embedding provider: Health.save_warnings)."""
    headers = {"Location": ref.uri, "X-Resource-URI": ref.uri}
    if ref.kind == "rags":
        return JSONResponse({"warnings": runtime.health.save_warnings(ref.id) if runtime is not None else []},
                            status_code=status, headers=headers)
    return Response(status_code=status, headers=headers)


_URI = {"description": "The version's EDDI URI (eddi://…?version=N)", "schema": {"type": "string"}}
# EDDI answers a write with no body: the new version's URI in Location and X-Resource-URI (a knowledge base's adds
# {warnings}: what keeps it from answering as saved, with the fix).
_WARNINGS = {"application/json": {"schema": {"type": "object", "required": ["warnings"], "properties": {"warnings": {
    "type": "array", "items": {"type": "object", "properties": {"check": {"type": "string"}, "detail": {"type": "string"},
                                                                   "fix": {"type": "string"}}}}}}}}


def written(kind: str) -> dict[str, Any]:
    return {"response_class": Response, "responses": {
        code: {"description": text, "headers": {"Location": _URI, "X-Resource-URI": _URI}, "content": _WARNINGS if kind == "rags" else {}}
        for code, text in ((200, "Updated: a new version"), (201, "Created"))}}


def rag_schema() -> dict[str, Any]:
    """The RagConfiguration JSON Schema as the OpenAPI document embeds it."""
    return {k: v for k, v in configuration_schema().items() if k not in ("$schema", "$id")}


def provider_schema() -> dict[str, Any]:
    """A providers map entry's JSON Schema as the OpenAPI document embeds it."""
    return {k: v for k, v in provider_entry_schema().items() if k not in ("$schema", "$id")}


LATER = "x-eddi-rag-schema"  # a body's JSON Schema named, given when the OpenAPI document is made (``document_schemas``)


def document_schemas(node: Any) -> None:
    """Each ``{LATER: kind}`` in the OpenAPI document replaced by that schema: the RagConfiguration's (made from every
    connector registered) and a provider's are made when the document is asked for, not at every start."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, dict) and LATER in value:  # (over what FastAPI made of the route's body, as openapi_extra was)
                given = _without_none(rag_schema() if value[LATER] == "rags" else provider_schema())
                node[key] = {**{k: v for k, v in value.items() if k != LATER}, **given}
            else:
                document_schemas(value)
    elif isinstance(node, list):
        for value in node:
            document_schemas(value)


def _without_none(node: Any) -> Any:
    """(as FastAPI writes the document: no key whose value is null)"""
    if isinstance(node, dict):
        return {k: _without_none(v) for k, v in node.items() if v is not None}
    return [_without_none(v) for v in node] if isinstance(node, list) else node


class ChunkPreviewRequest(RequestBody):
    model_config = ConfigDict(json_schema_extra={"oneOf": [{"required": ["text"]}, {"required": ["base64"]}]})

    configuration: dict[str, Any] = Field(json_schema_extra=lambda schema: schema.update(rag_schema()))
    documentName: str = Field("pasted.txt", min_length=1, max_length=500)
    text: str | SkipJsonSchema[None] = None  # exactly one of text and base64
    base64: str | SkipJsonSchema[None] = None

    @model_validator(mode="before")
    @classmethod
    def no_nulls(cls, data: Any) -> Any:
        for name in ("text", "base64"):
            if isinstance(data, dict) and name in data and data[name] is None:
                raise ValueError(f"{name} must be a string (leave it out instead of null)")
        return data

    @model_validator(mode="after")
    def one_document(self) -> ChunkPreviewRequest:
        if (self.text is None) == (self.base64 is None):
            raise ValueError("give the document as exactly one of text or base64")
        return self

    def data(self) -> bytes:
        if self.text is not None:
            return self.text.encode("utf-8")
        try:
            return binascii.a2b_base64(self.base64 or "")
        except (binascii.Error, ValueError) as e:  # ValueError: characters outside ASCII
            raise BadUploadError(f"base64: not valid base64 ({e})") from None


Adopt = Annotated[bool, Query(description="A knowledge base: adopt the existing table or collection it names, which no "
                                           "knowledge base holds (an EDDI store). Admins only; an adopted store is never dropped.")]


def adopting(caller: Principal, adopt: bool) -> bool:
    if adopt:
        check_role(caller, "admin", "adopt an existing store")
    return adopt


@functools.cache
def resource_router(kind: str, path: tuple[str, str] | None = None) -> APIRouter:
    """The versioned endpoints of ``kind`` at EDDI's path, or at ``path`` (store, collection: an older spelling
    that still answers, left out of the OpenAPI document). Made once a process, as the other routers are (each app
    includes it: FastAPI declaring its 62 routes took 0.1-0.2 s of every app made)."""
    _, store, collection = RESOURCE_TYPES[kind]
    store, collection = path or (store, collection)
    router = APIRouter(prefix=f"/{store}/{collection}", tags=[kind], route_class=Route, responses=ERROR_RESPONSES,
                       include_in_schema=path is None)

    # A knowledge base's body is a RagConfiguration, a provider's a providers map entry: the OpenAPI document
    # gives their JSON Schemas.
    schema = {LATER: kind} if kind in ("rags", "providers") else None
    body: dict[str, Any] = ({"openapi_extra": {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}}
                            if schema else {})

    if kind == "rags":
        @router.get("/jsonSchema")
        def json_schema(caller: Viewer) -> dict[str, Any]:
            return configuration_schema()

        @router.post("/chunkPreview")
        def chunk_preview(body: ChunkPreviewRequest, request: Request, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
            """The chunks ``configuration`` would make of a document (``text``, or a file as ``base64``),
            with their sizes in the model's tokens; embeds and stores nothing."""
            data = body.data()
            if len(data) > request.app.state.max_upload_bytes:
                raise too_large("the document", request.app.state.max_upload_bytes)
            return runtime.ingesting.preview(body.configuration, caller.tenant, body.documentName, data, text=body.text is not None)

    def shared(runtime: Any, caller: Principal, id: str, need: str) -> None:
        """A knowledge base shared with named users and groups (grants) is reachable by them alone."""
        if kind == "rags":
            runtime.grants.check(caller, id, need)

    @router.get("/descriptors")
    def descriptors(runtime: RuntimeDep, caller: Viewer, filter: str = "", index: Offset = 0,
                    limit: int = Query(20, ge=1, le=1000)):
        """One page of descriptors (a knowledge base shared with others than the caller is left out of it)."""
        found = runtime.catalog.page(kind, caller.tenant, filter, index, limit)
        return [d.to_json() for d in found if kind != "rags" or runtime.grants.may(caller, parse_uri(d.resource).id, "VIEW")]

    @router.post("", status_code=201, **written(kind), **body)
    def create(runtime: RuntimeDep, caller: Editor, data: dict[str, Any] = Body(...), adopt: Adopt = False):
        return _created(runtime.saving.create(kind, data, caller.tenant, adopt=adopting(caller, adopt), who=caller), 201, runtime)

    @router.get("/{id}")
    def read(id: str, runtime: RuntimeDep, caller: Viewer, version: Version = 0):
        data = runtime.catalog.shown(kind, id, version, caller.tenant)
        shared(runtime, caller, id, "VIEW")
        return data

    @router.get("/{id}/versions")
    def versions(id: str, runtime: RuntimeDep, caller: Viewer) -> list[dict[str, Any]]:
        """Each version, newest first, with when and by whom it was saved: {version, createdOn, author} (author: user:<id>
        or key <id>; null when nobody was asked: auth off, an import, a version saved before authors were kept)."""
        found = runtime.catalog.versions(kind, id, caller.tenant)
        shared(runtime, caller, id, "VIEW")
        return found

    @router.put("/{id}", **written(kind), **body)
    def update(id: str, runtime: RuntimeDep, caller: Editor, version: Annotated[int, Query(ge=1, le=MAX_VERSION)],
               data: dict[str, Any] = Body(...), adopt: Adopt = False):
        runtime.catalog.own(kind, id, caller.tenant)
        shared(runtime, caller, id, "EDIT")
        return _created(runtime.saving.update(kind, id, version, data, caller.tenant, adopt=adopting(caller, adopt), who=caller),
                        200, runtime)

    @router.post("/{id}", status_code=201, **written(kind))
    def duplicate(id: str, runtime: RuntimeDep, caller: Editor, version: Version = 0):
        runtime.catalog.own(kind, id, caller.tenant)
        shared(runtime, caller, id, "VIEW")
        return _created(runtime.saving.duplicate(kind, id, version, who=caller), 201, runtime)

    @router.delete("/{id}", response_class=Response, responses={200: {"description": "Deleted (no body)", "content": {}}})
    def delete(id: str, runtime: RuntimeDep, caller: Editor, version: Version = 0, permanent: bool = False):
        runtime.catalog.own(kind, id, caller.tenant)
        shared(runtime, caller, id, "EDIT")
        runtime.saving.delete(kind, id, version, permanent)
        return Response(status_code=200)

    return router
