"""A knowledge base's configuration as it is used (validated; ``embeddingProviderId`` resolved in the
KB's own tenant, or marked disabled), and the rules every resource passes before it is saved, whoever
saves it (REST, the Manager, an EDDI import, a bundle, the memory KBs)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from eddi_rag.backends import registry
from eddi_rag.backends.factories import NO_EMBEDDING_FIX
from eddi_rag.common import paths
from eddi_rag.common.outbound import OutboundBlockedError, OutboundPolicy
from eddi_rag.common.secrets import env_secret_errors
from eddi_rag.config import (
    ConfigValidationError,
    RagConfiguration,
    llm_task_errors,
    load_schema,
    unknown_fields,
    validate_rag_configuration,
    with_source_ids,
)
from eddi_rag.embeddings import references as provider_references
from eddi_rag.ingest import ocr
from eddi_rag.resource_types import Descriptor, ResourceNotFoundError
from eddi_rag.resources import ResourceStore
from eddi_rag.resources.variables import Variables
from eddi_rag.resources.variables import references as variable_references
from eddi_rag.sources.connectors import block_fields, configuration_schema
from eddi_rag.sources.connectors import built_schema as built_schema  # (for the reference pages: tools/reference.py)
from eddi_rag.stores.base import KEYWORD_SEARCH
from eddi_rag.workflow.traversal import reference_errors

log = logging.getLogger(__name__)


def _has_keyword_search(store_type: str) -> bool | None:
    """Whether the store type declares keyword search; None when its extra is not installed."""
    try:
        return KEYWORD_SEARCH in registry.load(registry.STORES, store_type).capabilities
    except registry.ProviderUnavailableError:
        return None


def fleet_store_error(store_type: str) -> str | None:
    """Why the machines of a fleet cannot share ``store_type`` (None: they can): a fleet needs a store server. (The
    serving processes of one ``serve`` share every store: an ``in-memory`` one is kept in the data directory's SQLite
    file, ``backends.factories.KEPT_ON_DISK``.)"""
    if store_type in registry.EMBEDDED_STORES:
        return (f"storeType {store_type!r} keeps its data on one machine, which the fleet's other processes cannot reach; "
                f"a fleet uses a store server: {', '.join(registry.shared_store_types())}")
    return None


class KnowledgeBases:
    def __init__(self, resources: ResourceStore, data_dir: Path | None, variables: Variables | None = None,
                 fleet: bool = False):
        """``fleet``: processes on several machines share the state: a knowledge base needs a store they all reach."""
        self.resources, self.data_dir, self.variables, self.fleet = resources, data_dir, variables, fleet

    def validate(self, data: Any) -> RagConfiguration:
        """Schema validation plus: the named provider and store type are registered, their parameters
        known, keyword search available for the search mode, paths confined."""
        config = validate_rag_configuration(data, configuration_schema())
        errors: list[dict[str, Any]] = []
        checks = [(registry.STORES, "$.storeType", config.storeType, config.storeParameters)]
        if config.embeddingProvider:  # (embeddingProviderId is resolved when used: its entry may come later)
            params = {} if config.embeddingProviderId else config.embeddingParameters  # checked against the entry's type then
            checks.insert(0, (registry.EMBEDDINGS, "$.embeddingProvider", config.embeddingProvider, params))
        for group, path, value, params in checks:
            known = registry.names(group)
            if value not in known:
                errors.append({"path": path, "message": f"{value!r} is not registered; known: {', '.join(known)}", "value": value})
            else:
                errors += registry.validate_parameters(group, value, params)
        if config.searchMode != "vector" and config.storeType in registry.store_types():
            # Without the store's extra we cannot tell; building the store will.
            if _has_keyword_search(config.storeType) is False:
                capable = [n for n in registry.store_types() if _has_keyword_search(n)]
                errors.append({"path": "$.searchMode", "value": config.searchMode,
                               "message": f"{config.searchMode!r} needs keyword search; storeType {config.storeType!r} has none "
                                          f"(use {', '.join(capable)}, or searchMode 'vector')"})
        errors += path_errors(config, self.data_dir)
        for field in ("embeddingParameters", "storeParameters", "rerankerParameters"):
            errors += env_secret_errors(getattr(config, field), f"$.{field}")
        if config.ocr != "off":
            errors += [{"path": "$.ocrLanguages", "value": config.ocrLanguages, "message": m} for m in ocr.language_errors(config.ocrLanguages)]
        if self.fleet and (problem := fleet_store_error(config.storeType)):
            errors.append({"path": "$.storeType", "value": config.storeType, "message": problem})
        if errors:
            raise ConfigValidationError(errors)
        return config

    @staticmethod
    def warnings(data: Any) -> list[dict[str, Any]]:
        """What is saved but will not do what its author likely expects, as {path, message, value, fix}: no embedding
        provider (every ingestion would fail), and embeddingParameters the provider does not take (EDDI logs and ignores
        them; so do we: ``registry.unused_embedding_parameters``). (``in-memory``, EDDI's default store, is kept on disk
        where there is a data directory: nothing to warn of.)"""
        if not isinstance(data, dict):
            return []
        out: list[dict[str, Any]] = []
        if not data.get("embeddingProvider") and not data.get("embeddingProviderId"):
            out.append({"path": "$.embeddingProvider", "value": None, "fix": NO_EMBEDDING_FIX,
                        "message": "not set, nor embeddingProviderId: nothing can be embedded, so every ingestion and "
                                   "search will fail (EDDI would embed with openai)"})
        provider, params = data.get("embeddingProvider"), data.get("embeddingParameters")
        if not data.get("embeddingProviderId") and isinstance(provider, str) and isinstance(params, dict):
            out += [{**w, "fix": "remove the parameters named (EDDI ignores them too), then save a new version"}
                    for w in registry.unused_embedding_parameters(provider, params)]
        return out

    def get(self, kb_id: str, version: int = 0) -> RagConfiguration:
        """The KB's configuration (ResourceNotFoundError for an unknown id or version), its embedding
        provider reference resolved in the KB's own tenant (or marked disabled), its ``${vars:…}`` replaced
        by the tenant's global variables."""
        data, tenant, stored = self.resources.read_owned("rags", kb_id, version)
        config = self.as_used(data, tenant)
        config._version = stored
        return config

    def as_used(self, data: Any, tenant: str) -> RagConfiguration:
        """A configuration of ``tenant`` as it is used: validated, its provider reference resolved, its global
        variables replaced."""
        return self.substituted(self.resolve_embedding(validate_rag_configuration(data, configuration_schema()), tenant), tenant)

    def substituted(self, config: RagConfiguration, tenant: str) -> RagConfiguration:
        """``config`` with its ``${vars:…}`` replaced by ``tenant``'s global variables, as a query reads it."""
        if self.variables is None:
            return config
        return config.model_copy(update={"embeddingParameters": self.variables.substitute(config.embeddingParameters, tenant),
                                         "storeParameters": self.variables.substitute(config.storeParameters, tenant)})

    def every(self, tenant: str | None, filter: str = "") -> Iterator[Descriptor]:
        """Every knowledge base of ``tenant`` (None: of every tenant) whose name or description holds ``filter``,
        newest first, read a page at a time: no face stops at a cap of its own."""
        return self.resources.every("rags", tenant, filter)

    def version(self, kb_id: str, version: int = 0) -> int:
        """``version``, or the current one for 0 (ResourceNotFoundError for an unknown id or version)."""
        self.resources.read("rags", kb_id, version)
        return version or self.resources.current_version("rags", kb_id)

    def provider_entry(self, provider_id: str, tenant: str) -> dict[str, Any] | None:
        """An entry of ``tenant``'s providers map (/providerstore/providers), or None (another tenant's too)."""
        try:
            return self.resources.read("providers", provider_id, tenant=tenant)
        except ResourceNotFoundError:
            return None

    def resolve_embedding(self, config: RagConfiguration, tenant: str) -> RagConfiguration:
        """``config`` with its embedding backend resolved from embeddingProviderId (an entry of
        ``tenant``'s providers map) / embeddingProvider, in ``tenant`` (whose secrets it reads)."""
        config = config.in_tenant(tenant)
        return provider_references.resolve_config(config, lambda id: self.provider_entry(id, tenant), registry.parameter_names)

    def checked(self, kind: str, data: Any, tenant: str, references: bool = True) -> dict[str, Any]:
        """What is saved of ``data``: a JSON object, valid for its kind (a RagConfiguration: ``validate``,
        and its sources get ids; a providers map entry: its schema; an httpCall: a target that may ever
        be called), naming (with ``references``) only resources of ``tenant``; ``references=False``: an
        import whose references point at resources it creates itself. Raises ConfigValidationError
        listing every problem as {path, message, value}."""
        if not isinstance(data, dict):
            raise ConfigValidationError([{"path": "$", "message": "a resource must be a JSON object", "value": data}])
        if references and (errors := reference_errors(self.resources, kind, data, tenant)):
            raise ConfigValidationError(errors)
        if kind == "httpcalls" and data.get("targetServerUrl") is not None:
            try:
                OutboundPolicy.check_static(str(data["targetServerUrl"]))
            except OutboundBlockedError as e:
                raise ConfigValidationError([{"path": "$.targetServerUrl", "message": str(e), "value": data["targetServerUrl"]}]) from None
        if kind == "providers" and (errors := provider_references.entry_errors(data)):
            raise ConfigValidationError(errors)
        if kind == "llm" and (errors := llm_task_errors(data, saving=True)):
            raise ConfigValidationError(errors)
        if kind != "rags":
            return data
        if errors := unknown_fields(data, configuration_schema()):
            raise ConfigValidationError(errors)
        self.validate(data)
        foreign = [{"path": f"$.{field}", "value": f"${{vars:{named}/{key}}}",
                    "message": f"names a global variable of tenant {named!r}; a knowledge base reads its own tenant's"}
                   for field in ("embeddingParameters", "storeParameters")
                   for named, key in variable_references(data.get(field) or {}) if named not in (None, tenant)]
        if foreign:
            raise ConfigValidationError(foreign)
        for warning in self.warnings(data):
            log.warning("%s: %s", warning["path"], warning["message"])
        return with_source_ids(data)


def path_errors(config: RagConfiguration, data_dir: Path | None) -> list[dict[str, Any]]:
    """The configuration's file paths that fall outside what the server allows, as validation errors."""
    out: list[dict[str, Any]] = []
    store_path = config.storeParameters.get("path")
    if isinstance(store_path, str) and store_path != paths.IN_MEMORY:
        allowed = paths.roots("EDDI_RAG_PATH_ROOTS", data_dir)
        if not paths.inside(paths.resolve(store_path, data_dir), allowed):  # (the server's folders are not shown)
            where = ("a relative path, under the server's data directory, or one under a folder the operator lists in "
                     "EDDI_RAG_PATH_ROOTS") if allowed else "none: this server keeps its data in memory"
            out.append({"path": "$.storeParameters.path", "value": store_path,
                        "message": f"must lie under the data directory or EDDI_RAG_PATH_ROOTS ({where})"})
    models = paths.roots("EDDI_RAG_MODEL_ROOTS")
    for group, params in (("embeddingParameters", config.embeddingParameters), ("rerankerParameters", config.rerankerParameters)):
        for key in ("modelPath", "tokenizerPath"):
            value = params.get(key)
            if isinstance(value, str) and not paths.inside(paths.resolve(value, None), models):
                out.append({"path": f"$.{group}.{key}", "value": value,
                            "message": "model files are read only from folders the operator lists in EDDI_RAG_MODEL_ROOTS "
                                       f"({', '.join(map(str, models)) or 'none set'})"})
    for i, source in enumerate(config.sources):
        fields = block_fields(source.type)
        for name, value in (source.block(source.type) or {}).items():
            field, path = fields.get(name) or {}, f"$.sources[{i}].{source.type}.{name}"
            if not isinstance(value, str):
                continue
            on_server = field.get("x-on-server") and (value.startswith("file:") or not field.get("x-outbound"))
            if on_server and not paths.in_folder_roots(unquote(urlsplit(value).path) if value.startswith("file:") else value):
                out.append({"path": path, "value": value,
                            "message": f"is outside the folders sources may read ({', '.join(map(str, paths.folder_roots()))}); "
                                       "the operator allows more with EDDI_RAG_FOLDER_ROOTS"})
            elif field.get("x-outbound") and not on_server:
                try:
                    OutboundPolicy.check_static(value)
                except OutboundBlockedError as e:
                    out.append({"path": path, "value": value, "message": str(e)})
    return out


def provider_entry_schema() -> dict[str, Any]:
    """A providers map entry's JSON Schema (``embeddings.references``)."""
    return load_schema(provider_references.ENTRY_SCHEMA)

