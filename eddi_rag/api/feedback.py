"""The feedback loop: citation votes reviewed (marked, noted, exported as CSV), and a knowledge base's saved
test questions, re-run after a configuration change to show which answers' passages changed."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Depends, Query
from fastapi.responses import Response
from pydantic import Field

from eddi_rag.api.deps import Editor, RuntimeDep, Viewer, curators_only, kb_of_tenant
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.api.limits import QueryLimit

kb_router = APIRouter(prefix="/ragstore/rags/{id}", tags=["feedback"], dependencies=[Depends(kb_of_tenant)], route_class=Route,
                      responses=ERROR_RESPONSES)

feedback_router = APIRouter(tags=["feedback"], route_class=Route, responses=ERROR_RESPONSES)


@feedback_router.get("/ragstore/feedback")
def feedback_list(runtime: RuntimeDep, caller: Viewer, kbId: str | None = None, vote: Literal["up", "down"] | None = None,
                  limit: int = Query(200, ge=1, le=1000), reviewed: bool | None = None) -> list[dict[str, Any]]:
    """Citation feedback of the caller's tenant, newest first (``vote=down``: what to review;
    ``reviewed=false``: not yet marked reviewed), on the knowledge bases it may view; a viewer sees, of knowledge bases
    that read by permissions, its own."""
    return runtime.feedback.list(caller.tenant, kbId, vote, limit, reviewed, caller=caller)


@feedback_router.get("/ragstore/feedback/export.csv", response_class=Response,
                     responses={200: {"content": {"text/csv": {}}}})
def feedback_csv(runtime: RuntimeDep, caller: Viewer, kbId: str | None = None,
                 vote: Literal["up", "down"] | None = None) -> Response:
    """The votes as CSV, for a spreadsheet."""
    return Response(runtime.feedback.csv(caller.tenant, kbId, vote, caller=caller), media_type="text/csv; charset=utf-8",
                    headers={"Content-Disposition": 'attachment; filename="feedback.csv"'})


class Review(RequestBody):
    reviewed: bool | None = None
    note: str | None = Field(default=None, max_length=4000)


@feedback_router.patch("/ragstore/feedback/{feedback_id}")
def feedback_review(feedback_id: str, body: Review, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Mark a vote reviewed (or not again) and keep a note on it."""
    return runtime.feedback.review(caller.tenant, feedback_id, body.reviewed, body.note)


class TestQuestion(RequestBody):
    question: str = Field(min_length=1, max_length=2000, pattern=r"\S")
    chunkId: str | None = Field(default=None, max_length=200)  # the chunk a vote named, when it came from one
    asUser: str | None = Field(default=None, min_length=1, max_length=300, pattern=r"\S", description=(
        "The user the question is asked as, with that user's permissions (the group directory's groups); without it, "
        "as nobody: of a knowledge base that reads by permissions, nothing is found."))


@kb_router.get("/questions")
def questions(id: str, runtime: RuntimeDep, caller: Viewer) -> list[dict[str, Any]]:
    """The knowledge base's saved test questions, each with its baseline (the passages it found when accepted); of a
    knowledge base that reads by permissions, for its editors."""
    curators_only(runtime, id, caller, "the test questions")
    return runtime.questions.list(caller.tenant, id)


@kb_router.post("/questions", status_code=201, dependencies=[QueryLimit])
def add_question(id: str, body: TestQuestion, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """Save a test question; what it finds now is its baseline."""
    with runtime.health.explained(id):
        return runtime.questions.add(caller.tenant, id, body.question, body.chunkId, caller.user_id, body.asUser)


@kb_router.post("/question-runs", dependencies=[QueryLimit])
def run_questions(id: str, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """Every saved question searched now, beside its baseline: which answers' passages changed."""
    curators_only(runtime, id, caller, "the test questions")
    with runtime.health.explained(id):
        return runtime.questions.run(caller.tenant, id)


@kb_router.post("/questions/accept-all")
def accept_all_questions(id: str, runtime: RuntimeDep, caller: Editor) -> list[dict[str, Any]]:
    """What every saved question finds now becomes its baseline."""
    with runtime.health.explained(id):
        return runtime.questions.accept_all(caller.tenant, id)


@kb_router.post("/questions/{question_id}/accept")
def accept_question(id: str, question_id: str, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    """What the question finds now becomes its baseline."""
    with runtime.health.explained(id):
        return runtime.questions.accept(caller.tenant, id, question_id)


@kb_router.delete("/questions/{question_id}", status_code=204)
def delete_question(id: str, question_id: str, runtime: RuntimeDep, caller: Editor) -> Response:
    runtime.questions.delete(caller.tenant, id, question_id)
    return Response(status_code=204)
