"""Find what an agent's workflows declare: RAG steps (knowledge bases) and httpCall configs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from eddi_rag.config import (
    ConfigValidationError,
    RagConfiguration,
    validate_rag_configuration,
)
from eddi_rag.resources import ResourceNotFoundError, ResourceStore, parse_uri

log = logging.getLogger(__name__)

RAG_STEP = "eddi://ai.labs.rag"
HTTPCALLS_STEP = "eddi://ai.labs.httpcalls"
LLM_STEP = "eddi://ai.labs.llm"


@dataclass
class DiscoveredKb:
    id: str
    version: int
    config: RagConfiguration
    workflow: bool = True  # found in the agent's workflows (enableWorkflowRag searches these); False: e.g. its memory KB


@dataclass
class Discovery:
    knowledge_bases: list[DiscoveredKb] = field(default_factory=list)
    httpcalls: list[dict[str, Any]] = field(default_factory=list)
    llm_tasks: list[dict[str, Any]] = field(default_factory=list)  # the tasks of the workflows' LLM steps
    skipped: list[str] = field(default_factory=list)  # why something was left out, for logs/tests


def workflow_steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    steps = workflow.get("workflowSteps")
    if steps is None:
        steps = workflow.get("workflowExtensions")  # older alias
    return [s for s in steps or [] if isinstance(s, dict)]


class WorkflowTraversal:
    def __init__(self, resources: ResourceStore,
                 resolve: Callable[[RagConfiguration], RagConfiguration] = lambda config: config):
        """``resolve``: a KB's embedding provider reference resolved (the Runtime's resolve_embedding)."""
        self.resources, self.resolve = resources, resolve

    def _load(self, uri: Any, kind: str, found: Discovery) -> tuple[str, int, dict[str, Any]] | None:
        try:
            ref = parse_uri(uri)
            if ref.kind != kind:
                raise ValueError(f"expected a {kind} URI, got {uri!r}")
            return ref.id, ref.version, self.resources.read(kind, ref.id, ref.version)
        except (ValueError, ResourceNotFoundError) as e:
            found.skipped.append(str(e))
            log.warning("skipping %s: %s", uri, e)
            return None

    def discover(self, agent_id: str, agent_version: int = 0) -> Discovery:
        found = Discovery()
        agent = self.resources.read("agents", agent_id, agent_version)
        for workflow_uri in agent.get("workflows") or []:
            loaded = self._load(workflow_uri, "workflows", found)
            if loaded is None:
                continue
            for step in workflow_steps(loaded[2]):
                uri = (step.get("config") or {}).get("uri")
                if not uri:
                    continue
                if step.get("type") == RAG_STEP:
                    rag = self._load(uri, "rags", found)
                    if rag is None:
                        continue
                    try:
                        config = self.resolve(validate_rag_configuration(rag[2]))
                    except ConfigValidationError as e:
                        found.skipped.append(f"{uri}: {e}")
                        continue
                    found.knowledge_bases.append(DiscoveredKb(rag[0], rag[1], config))
                elif step.get("type") == HTTPCALLS_STEP:
                    calls = self._load(uri, "httpcalls", found)
                    if calls is not None:
                        found.httpcalls.append(calls[2])
                elif step.get("type") == LLM_STEP:
                    llm = self._load(uri, "llm", found)
                    if llm is not None:
                        found.llm_tasks += [t for t in llm[2].get("tasks") or [] if isinstance(t, dict)]
        return found
