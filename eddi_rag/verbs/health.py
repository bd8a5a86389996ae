"""How a knowledge base is: its store's health and its embedding's status (never raises for a store's
problem: that is the answer), the doctor's checks with their fixes, and the chunk counts ``/metrics``
reports."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from eddi_rag import registry
from eddi_rag.config import ConfigValidationError, RagConfiguration
from eddi_rag.factories import EmbeddingModelFactory, EmbeddingStoreFactory
from eddi_rag.resources import ResourceStore
from eddi_rag.secrets import REDACTED, SecretNotFoundError, SecretResolver, redacted_paths, resolve_parameters
from eddi_rag.verbs.configs import Configs

log = logging.getLogger(__name__)


def embedding_status(config: RagConfiguration) -> dict[str, Any]:
    """How a KB embeds: {status: ok, provider, providerId?} or {status: disabled, reason}."""
    via = {"providerId": config.embeddingProviderId} if config.embeddingProviderId else {}
    if config.embedding_disabled:
        return {"status": "disabled", "reason": config.embedding_disabled, **via}
    return {"status": "ok", "provider": config.embeddingProvider, **via}


@dataclass
class Check:
    kb: str
    check: str
    ok: bool
    detail: str
    fix: str = ""


class Health:
    def __init__(self, configs: Configs, stores: EmbeddingStoreFactory, resources: ResourceStore,
                 embeddings: EmbeddingModelFactory, resolver: SecretResolver):
        self.configs, self.stores, self.resources, self.embeddings, self.resolver = configs, stores, resources, embeddings, resolver
        self.redact = resolver.redact

    def of(self, kb_id: str) -> dict[str, Any]:
        """{status, timestamp, storeType, error?, details, embedding} of a KB."""
        config = self.configs.get(kb_id)
        timestamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            report = self.stores.get(kb_id, config).health()
        except Exception as e:  # noqa: BLE001 - unreachable, missing secret, missing extra...
            report = {"status": "error", "error": f"{type(e).__name__}: {e}", "details": {}}
        result = {"status": report["status"], "timestamp": timestamp, "storeType": config.storeType,
                  "details": report.get("details", {}), "embedding": embedding_status(config)}
        if "error" in report:  # engines' messages may quote connection details: never a resolved secret
            result["error"] = self.redact(report["error"])
        return result

    def chunk_counts(self) -> list[tuple[str, str, str, int]]:
        """(KB id, name, store type, chunks) of every knowledge base whose store answers."""
        out = []
        for kb_id in self.resources.ids("rags"):
            try:
                config = self.configs.get(kb_id)
                out.append((kb_id, config.name, config.storeType, self.stores.get(kb_id, config).count()))
            except Exception as e:  # noqa: BLE001 - an unreachable store is health's business, not the count's
                log.debug("no chunk count for %s: %s", kb_id, self.redact(str(e)))
        return out

    def checks(self, kb_id: str) -> list[Check]:
        """``eddi-rag doctor`` for one KB: each check with its fix, up to the first that fails."""
        data = self.resources.read("rags", kb_id)
        name = f"{data.get('name', '?')} ({kb_id})"
        out: list[Check] = []
        try:
            config = self.configs.validate(data)
        except ConfigValidationError as e:
            return [Check(name, "configuration", False, str(e), "fix the fields named, then PUT a new version")]
        except (registry.ProviderUnavailableError, registry.UnknownProviderError) as e:
            return [Check(name, "provider", False, str(e), "install the extra named, or choose a registered provider")]
        if scrubbed := list(redacted_paths(data)):
            return [Check(name, "secrets", False, f"{', '.join(scrubbed)}: {REDACTED}, a secret an EDDI export scrubbed",
                          "put the secret in the vault (EDDI_VAULT_<KEY>), reference it as ${vault:<key>} there, "
                          "then PUT a new version")]
        config = self.configs.resolve_embedding(config, self.resources.tenant_of("rags", kb_id))
        if config.embedding_disabled:
            return [Check(name, "configuration", True, f"(no embedding) → {config.storeType}"),
                    Check(name, "embeddings", False, f"embedding disabled: {config.embedding_disabled}",
                          "create that entry at /providerstore/providers with a type that has embeddings, or set embeddingProvider")]
        assert config.embeddingProvider is not None  # not disabled
        via = f" (provider {config.embeddingProviderId!r})" if config.embeddingProviderId else ""
        out.append(Check(name, "configuration", True, f"{config.embeddingProvider}{via} → {config.storeType}"))
        try:
            for group, value in ((registry.EMBEDDINGS, config.embeddingProvider), (registry.STORES, config.storeType)):
                registry.load(group, value)
        except registry.ProviderUnavailableError as e:
            out.append(Check(name, "provider", False, str(e), "install the extra named in the message"))
            return out
        out.append(Check(name, "provider", True, "resolvable"))
        try:
            resolve_parameters(config.embeddingParameters, self.resolver)
            resolve_parameters(config.storeParameters, self.resolver)
        except SecretNotFoundError as e:
            out.append(Check(name, "secrets", False, str(e), "set the environment variable (vault: EDDI_VAULT_<KEY>)"))
            return out
        out.append(Check(name, "secrets", True, "all references resolve"))
        health = self.of(kb_id)
        if health["status"] != "ok":
            out.append(Check(name, "store", False, health.get("error", "unhealthy"), "start the store or fix storeParameters"))
            return out
        stored_dim = health["details"].get("dimension")
        out.append(Check(name, "store", True, f"reachable, {health['details'].get('documents', 0)} chunks"))
        try:
            model_dim = len(self.embeddings.for_config(config).embed_query("eddi-rag doctor dimension probe"))
        except Exception as e:  # noqa: BLE001 - the point is to report it
            out.append(Check(name, "embeddings", False, self.resolver.redact(f"{type(e).__name__}: {e}"),
                             "check embeddingParameters (apiKey, baseUrl, model)"))
            return out
        if stored_dim is not None and stored_dim != model_dim:
            out.append(Check(name, "dimensions", False, f"store holds {stored_dim}-d vectors, model gives {model_dim}-d",
                             "re-ingest into a new KB, or use the model the store was built with"))
        else:
            out.append(Check(name, "dimensions", True, f"{model_dim}-d" + ("" if stored_dim else " (store empty)")))
        return out

    def all_checks(self) -> list[Check]:
        """``checks`` of every knowledge base."""
        return [c for kb in sorted(self.resources.ids("rags")) for c in self.checks(kb)]
