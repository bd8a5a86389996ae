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
from eddi_rag.resource_types import ResourceNotFoundError, parse_uri
from eddi_rag.resources import ResourceStore
from eddi_rag.sources.connectors import configuration_schema

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
    tenant: str = "default"  # the agent's: where its configurations' secret references resolve


def workflow_steps(workflow: dict[str, Any]) -> list[dict[str, Any]]:
    steps = workflow.get("workflowSteps")
    if steps is None:
        steps = workflow.get("workflowExtensions")  # older alias
    return [s for s in steps or [] if isinstance(s, dict)]


# A workflow step type -> the kind of resource its config.uri names (what traversal reads).
STEP_KINDS = {RAG_STEP: "rags", HTTPCALLS_STEP: "httpcalls", LLM_STEP: "llm"}


def references(kind: str, data: dict[str, Any]) -> list[tuple[str, Any, str]]:
    """The URIs a resource names that traversal reads: (JSON path, URI, kind it must name)."""
    if kind == "agents":
        return [(f"$.workflows[{i}]", uri, "workflows") for i, uri in enumerate(data.get("workflows") or [])]
    if kind != "workflows":
        return []
    key = "workflowSteps" if data.get("workflowSteps") is not None else "workflowExtensions"
    out = []
    for i, step in enumerate(data.get(key) or []):
        uri = step.get("config", {}).get("uri") if isinstance(step, dict) and isinstance(step.get("config"), dict) else None
        if uri and step.get("type") in STEP_KINDS:  # (a step without a URI is skipped, as traversal skips it)
            out.append((f"$.{key}[{i}].config.uri", uri, STEP_KINDS[step["type"]]))
    return out


def reference_errors(resources: ResourceStore, kind: str, data: dict[str, Any], tenant: str) -> list[dict[str, Any]]:
    """Each reference of ``data`` that does not name an existing resource (and version) of ``tenant``:
    {path, message, value}. Missing and another tenant's read the same (nothing tells them apart)."""
    errors = []
    for path, uri, want in references(kind, data):
        try:
            ref = parse_uri(uri)
            if ref.kind != want:
                raise ValueError(f"expected a {want} URI, got a {ref.kind} URI")
            resources.read(want, ref.id, ref.version, tenant=tenant)
        except ValueError as e:
            errors.append({"path": path, "message": str(e)[:300], "value": str(uri)[:300]})
        except ResourceNotFoundError:
            errors.append({"path": path, "value": str(uri)[:300],
                           "message": f"no {want} {ref.id!r} version {ref.version or 'current'} in this tenant"})
    return errors


class WorkflowTraversal:
    def __init__(self, resources: ResourceStore,
                 resolve: Callable[[RagConfiguration, str], RagConfiguration] = lambda config, tenant: config):
        """``resolve``: a KB's embedding provider reference resolved in a tenant (``KnowledgeBases.resolve_embedding``)."""
        self.resources, self.resolve = resources, resolve

    def _load(self, uri: Any, kind: str, found: Discovery, tenant: str) -> tuple[str, int, dict[str, Any]] | None:
        try:
            ref = parse_uri(uri)
            if ref.kind != kind:
                raise ValueError(f"expected a {kind} URI, got {uri!r}")
            return ref.id, ref.version, self.resources.read(kind, ref.id, ref.version, tenant=tenant)
        except (ValueError, ResourceNotFoundError) as e:
            found.skipped.append(str(e))
            log.warning("skipping %s: %s", uri, e)
            return None

    def discover(self, agent_id: str, agent_version: int = 0, tenant: str | None = None) -> Discovery:
        """What the agent's workflows declare, every reference read within the agent's tenant (a
        resource of another tenant is skipped as missing). ``tenant``: the caller's; another
        tenant's agent is not found (ResourceNotFoundError)."""
        tenant = tenant or self.resources.tenant_of("agents", agent_id)
        found = Discovery(tenant=tenant)
        agent = self.resources.read("agents", agent_id, agent_version, tenant=tenant)
        for workflow_uri in agent.get("workflows") or []:
            loaded = self._load(workflow_uri, "workflows", found, tenant)
            if loaded is None:
                continue
            for step in workflow_steps(loaded[2]):
                uri = (step.get("config") or {}).get("uri")
                if not uri:
                    continue
                if step.get("type") == RAG_STEP:
                    rag = self._load(uri, "rags", found, tenant)
                    if rag is None:
                        continue
                    try:
                        config = self.resolve(validate_rag_configuration(rag[2], configuration_schema()), tenant)
                    except ConfigValidationError as e:
                        found.skipped.append(f"{uri}: {e}")
                        continue
                    config._version = rag[1]  # (the version the workflow names: what a retrieval's record says it read)
                    found.knowledge_bases.append(DiscoveredKb(rag[0], rag[1], config))
                elif step.get("type") == HTTPCALLS_STEP:
                    calls = self._load(uri, "httpcalls", found, tenant)
                    if calls is not None:
                        found.httpcalls.append(calls[2])
                elif step.get("type") == LLM_STEP:
                    llm = self._load(uri, "llm", found, tenant)
                    if llm is not None:
                        found.llm_tasks += [t for t in llm[2].get("tasks") or [] if isinstance(t, dict)]
        return found
