"""Searching a knowledge base: query (scored chunks and their passages), the context an LLM task
would inject, the retrieve contract, health and the doctor's checks, citation feedback."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Request
from pydantic import Field

from eddi_rag.api.deps import RuntimeDep, Viewer, kb_of_tenant, readable
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.api.limits import QueryLimit
from eddi_rag.verbs.contract_types import MAX_QUERY_CHARS
from eddi_rag.verbs.search import SearchRequest, WithheldError

router = APIRouter(prefix="/ragstore/rags/{id}", tags=["retrieval"], dependencies=[Depends(kb_of_tenant)], route_class=Route, responses=ERROR_RESPONSES)

Expansion = Literal["none", "neighbors", "section"]


class QueryRequest(RequestBody):
    query: str = Field(min_length=1, max_length=2000, pattern=r"\S")
    maxResults: int | None = Field(default=None, ge=1, le=1000)
    minScore: float | None = Field(default=None, ge=0, le=1)
    where: dict[str, Any] | None = None
    userId: str | None = None
    contextExpansion: Expansion | None = None  # default: the KB's
    maxContextChars: int | None = Field(default=None, ge=1)  # the passages grow within this budget
    marks: bool = False  # also each hit's sentences that match the query best (matchOffsets): the Manager's Try it


class RetrieveRequest(RequestBody):
    """The retrieve contract: validation of the query itself is the contract's (InvalidQueryError → 400);
    the schema says what it accepts."""

    query: str = Field(json_schema_extra={"minLength": 1, "maxLength": MAX_QUERY_CHARS, "pattern": r"\S"})
    maxChunks: int = Field(default=5, ge=1, le=1000)
    minRelevance: float = Field(default=0.6, ge=0, le=1)
    userId: str | None = None
    where: dict[str, Any] | None = None
    contextExpansion: Expansion | None = None  # default: the KB's


@router.post("/query", dependencies=[QueryLimit])
def query(id: str, body: QueryRequest, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """Scored chunks and their passages; ``userId`` only for credentials acting for users and administrators (a
    credential bound to a user always searches as that user); ``marks``: each result also says which of its
    sentences match the query best (``matchOffsets``, ``[start, end)`` in ``passage``). A knowledge base that cannot
    answer says why and how to fix it (the doctor's check). An administrator asking as ``userId`` a knowledge base
    that reads by permissions also gets what is withheld from that user, a row per document with the rule that withholds
    it (``withheld``: {documentId, source, acl, chunks, rule}), and who the user is to it (``asUser``: {user, known,
    principals}: a user no key and no group names is ``known: false``, often a misspelt name; Try it)."""
    request = SearchRequest(id, body.query, k=body.maxResults, min_score=body.minScore, where=body.where,
                            user_id=caller.searcher(body.userId), reader=caller.reader_for(body.userId),
                            expansion=body.contextExpansion, max_context_chars=body.maxContextChars)
    with runtime.health.explained(id):
        if body.userId is None or not caller.allows("admin"):
            return runtime.search.run(request).to_json(marked=body.marks)
        try:
            found = runtime.search.run(request).to_json(marked=body.marks)
        except WithheldError as e:  # the administrator sees why, and what the user would not get
            found = {"kbId": id, "query": body.query, "results": [], "passages": [], "withheldReason": str(e)}
        seen = runtime.search.as_user(request, [r["id"] for r in found["results"]],
                                      lambda user: runtime.groups.knows(caller.tenant, user) or runtime.keys.bound_to(caller.tenant, user))
        return {**found, "withheld": seen.pop("withheld"), "asUser": seen}


class ContextRequest(RequestBody):
    """One LLM task referencing this KB alone: what the LlmTask hook would inject for ``query``."""

    query: str = Field(min_length=1, max_length=2000, pattern=r"\S")
    userId: str | None = None
    maxResults: int | None = Field(default=None, ge=1, le=1000)  # default: the KB's
    minScore: float | None = Field(default=None, ge=0, le=1)
    contextExpansion: Expansion | None = None
    maxRagContextChars: int | None = Field(default=20000, ge=1)
    answer: bool = False  # also answer from it (Try it): the server's chat model, else the extractive answer


@router.post("/context", dependencies=[QueryLimit])
def context(id: str, body: ContextRequest, request: Request, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """{section: "## Relevant Context:\n..." exactly as injected (null: nothing passed), sources, trace}; with
    ``answer``, also {answer: {text, by: model | extractive, model}}: the server's chat model's answer from it, or
    with none the extractive answer (its sentences that cover the question, with their [Source n])."""
    found = runtime.turns.context(id, body.query, caller.searcher(body.userId), body.maxResults, body.minScore,
                                  body.contextExpansion, body.maxRagContextChars, caller.reader_for(body.userId))
    if body.answer:
        found["answer"] = runtime.turns.answered(found["section"], body.query, request.app.state.chat_model)
    return found


class FeedbackRequest(RequestBody):
    query: str = Field(min_length=1, max_length=2000, pattern=r"\S")
    chunkId: str = Field(min_length=1, max_length=200)
    vote: Literal["up", "down"]
    source: str | None = Field(default=None, max_length=2000)
    citation: str | None = Field(default=None, max_length=2000)
    comment: str | None = Field(default=None, max_length=4000)


@router.post("/feedback", status_code=201)
def feedback(id: str, body: FeedbackRequest, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """Thumbs up / down on a cited source, stored with the question for review (GET /ragstore/feedback);
    any viewer, for a chunk of this KB its search can see (404 otherwise)."""
    item = runtime.feedback.record(caller.tenant, id, body.query, body.chunkId, body.vote, body.source, body.citation,
                                   body.comment, caller.user_id, readable(runtime, id, caller))
    return item.__dict__


@router.post("/retrieve", dependencies=[QueryLimit])
def retrieve(id: str, body: RetrieveRequest, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """RAGContext: chunks above minRelevance, empty when their average is below it; cached 5 minutes."""
    request = SearchRequest(id, body.query, k=body.maxChunks, where=body.where, user_id=caller.user_for(body.userId),
                            reader=caller.reader_for(body.userId), expansion=body.contextExpansion)
    with runtime.health.explained(id):
        return runtime.search.retrieve(request, body.minRelevance).to_json()


@router.get("/health")
def kb_health(id: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """The store's health; a viewer of a knowledge base that reads by permissions counts only what it may read."""
    return runtime.health.of(id, readable(runtime, id, caller))


@router.get("/doctor")
def kb_doctor(id: str, runtime: RuntimeDep, caller: Viewer) -> list[dict[str, Any]]:
    """``eddi-rag doctor`` for this KB: every check, [{check, ok, level, detail, fix}] (a viewer of a knowledge base
    that reads by permissions: without what counts or names its chunks)."""
    checks = runtime.health.checks(id) if caller.allows("editor") else runtime.health.reader_checks(id)
    return [c.to_json() for c in checks]


@router.get("/verdict")
def kb_verdict(id: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """One verdict from the doctor's checks: {status: ok | warning | failed, check, detail, fix, problems, checks}."""
    return runtime.health.verdict(id, curator=caller.allows("editor"))
