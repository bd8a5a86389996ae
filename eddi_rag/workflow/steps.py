"""Workflow step types. A runtime deploys a workflow only if it knows every step type in it;
``eddi://ai.labs.rag`` is registered as a step that does nothing at run time (the LlmTask hook
reads it), which EDDI forgot, so EDDI workflows with a RAG step failed to deploy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddi_rag.errors import EddiRagError
from eddi_rag.resource_types import parse_uri
from eddi_rag.resources import ResourceStore
from eddi_rag.workflow.memory import ConversationMemory
from eddi_rag.workflow.traversal import HTTPCALLS_STEP, LLM_STEP, RAG_STEP, workflow_steps

Step = Callable[[ConversationMemory, dict[str, Any]], None]


def _noop(memory: ConversationMemory, step: dict[str, Any]) -> None:
    """Configuration-only steps: their config is read by the LlmTask hook."""


# The LLM step itself is run by the agent runtime, which calls LlmTaskHook for it.
STEP_TYPES: dict[str, Step] = {RAG_STEP: _noop, HTTPCALLS_STEP: _noop, LLM_STEP: _noop}


class UndeployableWorkflowError(EddiRagError, ValueError):
    status = 400
    pass


def register_step_type(type_uri: str, step: Step) -> None:
    STEP_TYPES[type_uri] = step


def check_deployable(resources: ResourceStore, agent_id: str, version: int = 0) -> None:
    """Raise naming the first step whose type no one registered."""
    agent = resources.read("agents", agent_id, version)
    for uri in agent.get("workflows") or []:
        ref = parse_uri(uri)
        for i, step in enumerate(workflow_steps(resources.read("workflows", ref.id, ref.version))):
            if step.get("type") not in STEP_TYPES:
                raise UndeployableWorkflowError(
                    f"workflow {ref.id} step {i}: unknown type {step.get('type')!r}; registered: {', '.join(sorted(STEP_TYPES))}"
                )
