"""The rules a resource passes before it is saved, whoever saves it (REST, the Manager, an EDDI import):
a JSON object, valid for its kind (a RagConfiguration: schema, registered provider and store, their
parameters, allowed paths and sources, and its sources get ids; a providers map entry: its schema; an
httpCall: a target that may ever be called), naming (with ``references``) only resources of its tenant.
Raises ConfigValidationError listing every problem as {path, message, value}."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eddi_rag.config import ConfigValidationError, RagConfiguration, with_source_ids
from eddi_rag.embeddings import references as provider_references
from eddi_rag.outbound import OutboundBlockedError, OutboundPolicy
from eddi_rag.resources import ResourceStore
from eddi_rag.workflow.traversal import reference_errors


def checked(validate_rag: Callable[[Any], RagConfiguration], resources: ResourceStore, kind: str, data: Any,
            tenant: str, references: bool = True) -> dict[str, Any]:
    """What is saved of ``data`` (``references=False``: an import whose references point at resources
    it creates itself, rewritten by the import)."""
    if not isinstance(data, dict):
        raise ConfigValidationError([{"path": "$", "message": "a resource must be a JSON object", "value": data}])
    if references and (errors := reference_errors(resources, kind, data, tenant)):
        raise ConfigValidationError(errors)
    if kind == "httpcalls" and data.get("targetServerUrl") is not None:
        try:
            OutboundPolicy.check_static(str(data["targetServerUrl"]))
        except OutboundBlockedError as e:
            raise ConfigValidationError([{"path": "$.targetServerUrl", "message": str(e), "value": data["targetServerUrl"]}]) from None
    if kind == "providers" and (errors := provider_references.entry_errors(data)):
        raise ConfigValidationError(errors)
    if kind != "rags":
        return data
    validate_rag(data)
    return with_source_ids(data)
