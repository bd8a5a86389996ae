"""Searching a knowledge base: query (scored chunks and their passages), the retrieve contract, health."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends
from pydantic import BaseModel, Field

from eddi_rag.api.deps import RuntimeDep, Viewer, kb_of_tenant

router = APIRouter(prefix="/ragstore/rags/{id}", tags=["retrieval"], dependencies=[Depends(kb_of_tenant)])

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


@router.post("/query")
def query(id: str, body: QueryRequest, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """Scored chunks and their passages; ``userId`` only for credentials acting for users (a
    credential bound to a user always searches as that user)."""
    user = caller.user_for(body.userId)
    config = runtime.rag_config(id)
    hits = runtime.retriever.search(id, config, body.query, body.maxResults, body.minScore, body.where, user)
    passages = runtime.retriever.passages(id, config, hits, body.contextExpansion, user, body.maxContextChars)
    text_of = {h.id: p.text for p in passages for h in p.hits}
    return {"kbId": id, "name": config.name, "query": body.query,
            "contextExpansion": body.contextExpansion or config.contextExpansion,
            "results": [{**h.to_json(), "passage": text_of.get(h.id)} for h in hits],
            "passages": [p.to_json() for p in passages]}


@router.post("/retrieve")
def retrieve(id: str, body: RetrieveRequest, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """RAGContext: chunks above minRelevance, empty when their average is below it; cached 5 minutes."""
    return runtime.pipeline.retrieve(body.query, id, body.maxChunks, body.minRelevance, user_id=caller.user_for(body.userId),
                                     where=body.where, expansion=body.contextExpansion).to_json()


@router.get("/health")
def kb_health(id: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    return runtime.health(id)
