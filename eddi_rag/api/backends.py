"""The registered stores and embedding providers with their parameter schemas."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from eddi_rag.api.deps import Viewer
from eddi_rag.api.edge import ERROR_RESPONSES, Route
from eddi_rag.backends import registry

router = APIRouter(route_class=Route, responses=ERROR_RESPONSES)


@router.get("/providers", tags=["providers"])
def providers(caller: Viewer) -> dict[str, Any]:
    """Registered stores and embedding providers with their capabilities."""
    found = registry.described()
    return {kind: [{k: v for k, v in found[group][n].items() if k != "schema"} for n in sorted(found[group])]
            for kind, group in registry.KINDS.items()}


@router.get("/providers/{kind}/{name}/schema", tags=["providers"])
def provider_schema(kind: str, name: str, caller: Viewer) -> dict[str, Any]:
    """The JSON Schema of storeParameters (kind=stores) or embeddingParameters (kind=embeddings)."""
    if kind not in registry.KINDS:
        raise HTTPException(404, f"unknown provider kind {kind!r}; use stores or embeddings")
    try:
        described = registry.description(registry.KINDS[kind], name)
    except registry.UnknownProviderError as e:
        raise HTTPException(404, str(e)) from e
    if not described["available"]:
        raise HTTPException(503, described["error"])
    return described["schema"]
