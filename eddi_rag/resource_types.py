"""What names a resource (its kind, id, version, tenant and EDDI URI), its descriptor, and the errors a lookup
raises: the contract the faces and the resource store share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eddi_rag.errors import EddiRagError

# kind -> (authority, store, collection): eddi://<authority>/<store>/<collection>/<id>?version=N
RESOURCE_TYPES: dict[str, tuple[str, str, str]] = {
    "rags": ("ai.labs.rag", "ragstore", "rags"),
    "agents": ("ai.labs.agent", "agentstore", "agents"),
    "workflows": ("ai.labs.workflow", "workflowstore", "workflows"),
    "httpcalls": ("ai.labs.apicalls", "apicallstore", "apicalls"),
    "llm": ("ai.labs.llm", "llmstore", "llms"),
    "providers": ("ai.labs.providers", "providerstore", "providers"),  # the providers map (embeddingProviderId)
}

# Other spellings of a kind's URI: ours before we took EDDI's (their REST paths answer too), and EDDI v5's.
OLDER_URIS: dict[tuple[str, str, str], str] = {
    ("ai.labs.httpcalls", "httpcallsstore", "httpcalls"): "httpcalls",
    ("ai.labs.llm", "llmstore", "llmconfigs"): "llm",
}
URI_ALIASES: dict[tuple[str, str, str], str] = {
    **OLDER_URIS,
    ("ai.labs.langchain", "langchainstore", "langchains"): "llm",
    ("ai.labs.package", "packagestore", "packages"): "workflows",
    ("ai.labs.bot", "botstore", "bots"): "agents",
}

DEFAULT_TENANT = "default"  # the tenant of a resource written without one (auth off: every caller's)
MAX_VERSION = 2**31 - 1  # a version number fits a 32-bit signed integer (EDDI's Java int)

_VERSION = re.compile(r"(?:^|&)version=(\d+)(?:&|$)")
_URI = re.compile(r"^eddi://([^/?#]+)/([^/?#]+)/([^/?#]+)/([^/?#]+)(?:\?(.*))?$")


class ResourceNotFoundError(EddiRagError, LookupError):
    status = 404
    pass


class VersionConflictError(EddiRagError):
    """The caller named a version that is not the current one (HTTP 409)."""
    status = 409

    def __init__(self, kind: str, id: str, given: int, current: int):
        self.current = current
        super().__init__(f"{kind}/{id}: version {given} is not the current version {current}")

    def body(self) -> dict[str, Any]:
        return {"error": str(self), "currentVersion": self.current}


@dataclass(frozen=True)
class ResourceRef:
    kind: str
    id: str
    version: int

    @property
    def uri(self) -> str:
        return resource_uri(self.kind, self.id, self.version)


@dataclass(frozen=True)
class Descriptor:
    resource: str
    name: str
    description: str
    createdOn: str  # ISO 8601, UTC
    lastModifiedOn: str
    deleted: bool = False

    def to_json(self) -> dict[str, Any]:
        """EDDI's DocumentDescriptor: dates in epoch milliseconds; who created and last changed it and the
        resource it came from (``createdBy``, ``lastModifiedBy``, ``originId``) are not recorded here: null."""
        return {"resource": self.resource, "name": self.name, "description": self.description,
                "createdBy": None, "createdOn": epoch_ms(self.createdOn), "lastModifiedBy": None,
                "lastModifiedOn": epoch_ms(self.lastModifiedOn), "originId": None, "deleted": self.deleted}


def epoch_ms(iso: str) -> int:
    return round(datetime.fromisoformat(iso).timestamp() * 1000)


def resource_uri(kind: str, id: str, version: int) -> str:
    authority, store, collection = RESOURCE_TYPES[kind]
    return f"eddi://{authority}/{store}/{collection}/{id}?version={version}"


def parse_uri(uri: str) -> ResourceRef:
    """Parse ``eddi://ai.labs.rag/ragstore/rags/<id>?version=N``. Raises ValueError when malformed."""
    m = _URI.match(uri.strip()) if isinstance(uri, str) else None
    if not m:
        raise ValueError(f"not a resource URI: {uri!r}")
    authority, store, collection, id, query = m.groups()
    kind = next((k for k, v in RESOURCE_TYPES.items() if v == (authority, store, collection)),
                URI_ALIASES.get((authority, store, collection)))
    if kind is None:
        raise ValueError(f"unknown resource type in URI: {uri!r}")
    version = _VERSION.search(query or "")
    if not version:
        raise ValueError(f"resource URI has no version: {uri!r}")
    return ResourceRef(kind, id, int(version.group(1)))
