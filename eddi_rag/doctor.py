"""``eddi-rag doctor``: check every configured knowledge base and say how to fix what fails."""

from __future__ import annotations

from dataclasses import dataclass

from eddi_rag import registry
from eddi_rag.config import ConfigValidationError
from eddi_rag.runtime import Runtime
from eddi_rag.secrets import SecretNotFoundError, resolve_parameters


@dataclass
class Check:
    kb: str
    check: str
    ok: bool
    detail: str
    fix: str = ""


def check_knowledge_base(runtime: Runtime, kb_id: str) -> list[Check]:
    data = runtime.resources.read("rags", kb_id)
    name = f"{data.get('name', '?')} ({kb_id})"
    out: list[Check] = []
    try:
        config = runtime.validate_rag(data)
    except ConfigValidationError as e:
        return [Check(name, "configuration", False, str(e), "fix the fields named, then PUT a new version")]
    except (registry.ProviderUnavailableError, registry.UnknownProviderError) as e:
        return [Check(name, "provider", False, str(e), "install the extra named, or choose a registered provider")]
    config = runtime.resolve_embedding(config, runtime.resources.tenant_of("rags", kb_id))
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
        resolve_parameters(config.embeddingParameters, runtime.resolver)
        resolve_parameters(config.storeParameters, runtime.resolver)
    except SecretNotFoundError as e:
        out.append(Check(name, "secrets", False, str(e), "set the environment variable (vault: EDDI_VAULT_<KEY>)"))
        return out
    out.append(Check(name, "secrets", True, "all references resolve"))
    health = runtime.health(kb_id)
    if health["status"] != "ok":
        out.append(Check(name, "store", False, health.get("error", "unhealthy"), "start the store or fix storeParameters"))
        return out
    stored_dim = health["details"].get("dimension")
    out.append(Check(name, "store", True, f"reachable, {health['details'].get('documents', 0)} chunks"))
    try:
        model_dim = len(runtime.embeddings.for_config(config).embed_query("eddi-rag doctor dimension probe"))
    except Exception as e:  # noqa: BLE001 - the point is to report it
        out.append(Check(name, "embeddings", False, runtime.resolver.redact(f"{type(e).__name__}: {e}"),
                         "check embeddingParameters (apiKey, baseUrl, model)"))
        return out
    if stored_dim is not None and stored_dim != model_dim:
        out.append(Check(name, "dimensions", False, f"store holds {stored_dim}-d vectors, model gives {model_dim}-d",
                         "re-ingest into a new KB, or use the model the store was built with"))
    else:
        out.append(Check(name, "dimensions", True, f"{model_dim}-d" + ("" if stored_dim else " (store empty)")))
    return out


def run_doctor(runtime: Runtime) -> list[Check]:
    return [c for kb in sorted(runtime.resources.ids("rags")) for c in check_knowledge_base(runtime, kb)]


def format_table(checks: list[Check]) -> str:
    rows = [("KNOWLEDGE BASE", "CHECK", "STATUS", "DETAIL", "FIX")]
    rows += [(c.kb, c.check, "ok" if c.ok else "FAIL", c.detail, c.fix) for c in checks]
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    return "\n".join("  ".join(r[i].ljust(widths[i]) for i in range(5)).rstrip() for r in rows)
