"""Versioned resources (EDDI-compatible): rags, agents, workflows, httpcalls, llm configs, providers. What names
them (kinds, URIs, versions, tenants) and the errors a lookup raises are the contract in ``eddi_rag.resource_types``."""

from eddi_rag.resources.store import ResourceStore

__all__ = ["ResourceStore"]
