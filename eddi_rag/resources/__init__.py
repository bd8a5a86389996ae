"""Versioned resources (EDDI-compatible): rags, agents, workflows, httpcalls, llm configs."""

from eddi_rag.resources.base import (
    DEFAULT_TENANT,
    MAX_VERSION,
    RESOURCE_TYPES,
    Descriptor,
    ResourceNotFoundError,
    ResourceRef,
    ResourceStore,
    VersionConflictError,
    parse_uri,
    resource_uri,
)
from eddi_rag.resources.sqlite import SqliteResourceStore

__all__ = [
    "DEFAULT_TENANT",
    "MAX_VERSION",
    "RESOURCE_TYPES",
    "Descriptor",
    "ResourceNotFoundError",
    "ResourceRef",
    "ResourceStore",
    "SqliteResourceStore",
    "VersionConflictError",
    "parse_uri",
    "resource_uri",
]
