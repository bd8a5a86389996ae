"""An agent's turn through the LlmTask hook: the system message it would build, the memory entries,
and the answer when the server has a chat model (``create_app(chat_model=...)``)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import Field

from eddi_rag.api.deps import RuntimeDep, Viewer
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route
from eddi_rag.api.limits import QueryLimit

router = APIRouter(prefix="/agentstore/agents/{id}", tags=["agents"], route_class=Route, responses=ERROR_RESPONSES)


class TurnRequest(RequestBody):
    message: str = Field(min_length=1, max_length=8000)
    userId: str | None = None
    taskId: str | None = None  # default: the first LLM task of the agent's workflows
    properties: dict[str, Any] | None = None  # EDDI's conversation properties, read by httpCall templates
    context: dict[str, Any] | None = None  # EDDI's context of the turn, read by httpCall templates


@router.post("/turn", dependencies=[QueryLimit])
def turn(id: str, body: TurnRequest, request: Request, runtime: RuntimeDep, caller: Viewer) -> dict[str, Any]:
    """{systemMessage, messages, knowledgeBases, memory (rag:trace / rag:context / rag:citations...), answer}."""
    return runtime.turns.turn(id, body.message, caller.user_for(body.userId), body.taskId, request.app.state.chat_model,
                        # another tenant's agent: 404; its references are read in the caller's tenant
                        tenant=caller.tenant, properties=body.properties, context=body.context,
                        reader=caller.reader_for(body.userId))
