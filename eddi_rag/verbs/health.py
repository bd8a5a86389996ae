"""How a knowledge base is: its store's health and its embedding's status (never raises for a store's
problem: that is the answer), the doctor's checks with their fixes, and the chunk counts ``/metrics``
reports."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from eddi_rag.backends import registry
from eddi_rag.backends.factories import EmbeddingModelFactory, EmbeddingStoreFactory
from eddi_rag.common.principals import ACL, DENY
from eddi_rag.common.secrets import REDACTED, SecretNotFoundError, SecretResolver, redacted_paths, resolve_parameters
from eddi_rag.config import ConfigValidationError, RagConfiguration
from eddi_rag.errors import EddiRagError
from eddi_rag.resources import ResourceStore
from eddi_rag.retrieval.access import AGENT_USERS, DOCUMENT_ACL, OWNER
from eddi_rag.stores.base import DimensionMismatchError
from eddi_rag.stores.ownership import UNVERIFIED
from eddi_rag.verbs.knowledge_bases import KnowledgeBases

log = logging.getLogger(__name__)


def embedding_status(config: RagConfiguration) -> dict[str, Any]:
    """How a KB embeds: {status: ok, provider, providerId?} or {status: disabled, reason}."""
    via = {"providerId": config.embeddingProviderId} if config.embeddingProviderId else {}
    if config.embedding_disabled:
        return {"status": "disabled", "reason": config.embedding_disabled, **via}
    return {"status": "ok", "provider": config.embeddingProvider, **via}


VAULTED = re.compile(r"\$\{(?:eddi)?vault:([^}]+)\}")  # a vault reference named in a secrets error
CHECKS = ("configuration", "provider", "secrets", "embeddings", "store", "dimensions", "documents", "ingestions", "sources", "acl")
ACL_SCAN = 20_000  # chunks read to count those without an ACL
NO_READER_FIX = ("give each its readers: PATCH …/documents/{documentId} {\"acl\": [...]} (its Documents page), a source's "
                 "settings.acl (Configuration: the source's Who may read them), or ingest it again with acl=")
COUNTING = ("store", "documents", "ingestions", "sources", "acl")  # checks whose details count or name chunks and documents


@dataclass
class Check:
    kb: str
    check: str
    ok: bool  # nothing to fix (a warning is ok: the KB works)
    detail: str
    fix: str = ""
    level: str = ""  # ok | warning | failed | skipped (a check it needs failed first); default: from ``ok``

    def __post_init__(self) -> None:
        self.level = self.level or ("ok" if self.ok else "failed")

    def to_json(self) -> dict[str, Any]:
        return {"check": self.check, "ok": self.ok, "level": self.level, "detail": self.detail, "fix": self.fix}


def verdict(checks: list[Check]) -> dict[str, Any]:
    """One verdict from a KB's checks: failed (it cannot answer), warning (it answers, but something needs a
    look: no documents, failed ingestions), else ok; with the first problem's detail and fix."""
    for level in ("failed", "warning"):
        found = [c for c in checks if c.level == level]
        if found:
            return {"status": level, "check": found[0].check, "detail": found[0].detail, "fix": found[0].fix,
                    "problems": len(found)}
    return {"status": "ok", "detail": "all checks passed", "problems": 0}


# errors of engines' clients that say it is out of reach (not a fault of the question): a search failing with one is a 503
UNAVAILABLE = frozenset({"OperationalError", "InterfaceError", "ConnectError", "ConnectTimeout", "ReadTimeout", "PoolTimeout",
                         "TransportError", "RemoteProtocolError", "ServerSelectionTimeoutError", "AutoReconnect",
                         "NetworkTimeout", "ConnectionTimeout", "ServiceUnavailable", "ResponseHandlingException"})


class KnowledgeBaseNotReadyError(EddiRagError):
    """A knowledge base cannot answer: the doctor's failed check, its detail and its fix. 409 when its
    configuration must change (configuration, provider, secrets, embeddings disabled, dimensions), 503 when
    something it depends on is down (store, embedding service)."""

    def __init__(self, kb_id: str, name: str, check: str, detail: str, fix: str, status: int = 409):
        super().__init__(f"knowledge base {name!r} cannot answer: {check}: {detail}")
        self.kb_id, self.check, self.detail, self.fix, self.status = kb_id, check, detail, fix, status

    def body(self) -> dict[str, Any]:
        return {"error": str(self), "kbId": self.kb_id, "check": self.check, "detail": self.detail, "fix": self.fix}


def _granted(acl: Any) -> bool:
    """Whether an ACL grants anyone (holds a principal that is no deny)."""
    return isinstance(acl, list) and any(isinstance(p, str) and not p.startswith(DENY) for p in acl)


def _endpoint(config: Any) -> str:
    """Where a knowledge base's embedding provider is called: its ``baseUrl``/``endpoint``, else the provider's default
    (its parameter schema's), else "its default endpoint"."""
    params = config.embeddingParameters
    named = params.get("baseUrl") or params.get("endpoint")
    if isinstance(named, str) and named:
        return named
    try:
        schema = registry.description(registry.EMBEDDINGS, config.embeddingProvider).get("schema", {})
    except Exception:  # noqa: BLE001 - only a better message is lost
        schema = {}
    default = schema.get("properties", {}).get("baseUrl", {}).get("default")
    return default if isinstance(default, str) else "its default endpoint"


class Health:
    def __init__(self, kbs: KnowledgeBases, stores: EmbeddingStoreFactory, resources: ResourceStore,
                 embeddings: EmbeddingModelFactory, resolver: SecretResolver,
                 failing: Callable[[str], list[str]] = lambda kb_id: [], authenticated: Callable[[], bool] = lambda: True,
                 sources: Callable[[str], list[dict[str, str]]] = lambda kb_id: []):
        """``failing(kb_id)``: the documents whose latest ingestion failed; ``authenticated()``: whether the server asks
        every caller who it is (a key exists, or OIDC is configured); ``sources(kb_id)``: what keeps its sources from
        keeping it in sync ({level, detail, fix}: ``SourceSync.problems``)."""
        self.kbs, self.stores, self.resources, self.embeddings, self.resolver = kbs, stores, resources, embeddings, resolver
        self.redact, self.failing, self.authenticated, self.sources = resolver.redact, failing, authenticated, sources

    def of(self, kb_id: str, readable: Any = None) -> dict[str, Any]:
        """{status, timestamp, storeType, error?, details, embedding} of a KB; ``readable``: a reader's filter
        (retrieval.access), whose count replaces the store's (and its size is left out)."""
        config = self.kbs.get(kb_id)
        timestamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
        try:
            store = self.stores.get(kb_id, config)
            report = store.health()
            if readable is not None and report["status"] == "ok":
                report["details"].pop("storage_bytes", None)
                report["details"]["documents"] = store.count(readable)
        except Exception as e:  # noqa: BLE001 - unreachable, missing secret, missing extra...
            report = {"status": "error", "error": f"{type(e).__name__}: {e}", "details": {}}
        result = {"status": report["status"], "timestamp": timestamp, "storeType": config.storeType,
                  "details": report.get("details", {}), "embedding": embedding_status(config)}
        if "error" in report:  # engines' messages may quote connection details: never a resolved secret
            result["error"] = self.redact(report["error"])
        return result

    def chunk_counts(self, kb_ids: Iterable[str] | None = None) -> list[tuple[str, str, str, int]]:
        """(KB id, name, store type, chunks) of every knowledge base (of ``kb_ids``, when given) whose store answers, but
        those that read by permissions (audience OWNER or DOCUMENT_ACL: their counts are their editors', in Health)."""
        out = []
        for kb_id in self.resources.ids("rags") if kb_ids is None else kb_ids:
            try:
                config = self.kbs.get(kb_id)
                if config.audience != AGENT_USERS:
                    continue
                out.append((kb_id, config.name, config.storeType, self.stores.get(kb_id, config).count()))
            except Exception as e:  # noqa: BLE001 - an unreachable store is health's business, not the count's
                log.debug("no chunk count for %s: %s", kb_id, self.redact(str(e)))
        return out

    def checks(self, kb_id: str) -> list[Check]:
        """``eddi-rag doctor`` for one KB: every check (``CHECKS``, in that order), each with its fix; one
        that needs a failed one is shown ``skipped``."""
        return sorted(self._checks(kb_id), key=lambda c: CHECKS.index(c.check))

    def _checks(self, kb_id: str) -> list[Check]:
        data = self.resources.read("rags", kb_id)
        name = f"{data.get('name', '?')} ({kb_id})"
        out: list[Check] = []

        def add(check: str, ok: bool, detail: str, fix: str = "", level: str = "") -> bool:
            out.append(Check(name, check, ok, detail, fix, level))
            return ok

        def skip(*checks: str, because: str) -> list[Check]:
            for check in checks:
                add(check, False, f"not checked: {because} failed", level="skipped")
            return out

        try:
            config = self.kbs.validate(data)
        except ConfigValidationError as e:
            add("configuration", False, str(e), "fix the fields named, then save a new version")
            return skip(*CHECKS[1:], because="configuration")
        except (registry.ProviderUnavailableError, registry.UnknownProviderError) as e:
            add("configuration", True, f"{data.get('embeddingProvider')} → {data.get('storeType', 'in-memory')}")
            add("provider", False, str(e), "install the extra named, or choose a registered provider")
            return skip(*CHECKS[2:], because="provider")
        tenant = self.resources.tenant_of("rags", kb_id)
        config = self.kbs.substituted(self.kbs.resolve_embedding(config, tenant), tenant)  # as a query reads it
        via = f" (provider {config.embeddingProviderId!r})" if config.embeddingProviderId else ""
        shape = f"{config.embeddingProvider or '(no embedding)'}{via} → {config.storeType}"
        if said := self.kbs.warnings(data):
            add("configuration", True, f"{shape}; " + "; ".join(f"{w['path']}: {w['message']}" for w in said),
                "; ".join(dict.fromkeys(w["fix"] for w in said)), level="warning")
        else:
            add("configuration", True, shape)
        try:
            for group, value in ((registry.EMBEDDINGS, config.embeddingProvider), (registry.STORES, config.storeType)):
                if value:
                    registry.load(group, value)
            provider = add("provider", True, "resolvable")
        except registry.ProviderUnavailableError as e:
            provider = add("provider", False, str(e), "install the extra named in the message")
        secrets = self._secrets(data, config, add)
        if not (provider and secrets):  # nothing further can be reached without them
            return skip("embeddings", "store", "dimensions", "documents", "ingestions", "sources", "acl",
                        because="provider" if not provider else "secrets")
        embeds = not config.embedding_disabled  # probed below, once the store answers
        if not embeds:
            add("embeddings", False, f"embedding disabled: {config.embedding_disabled}",
                "choose an embedding provider in the configuration (Embedding), or create that entry at "
                "/providerstore/providers with a type that has embeddings")
        health = self.of(kb_id)
        if health["status"] != "ok":
            add("store", False, health.get("error", "unhealthy"), "start the store or fix storeParameters")
            return skip("dimensions", "documents", "ingestions", "sources", "acl", because="store")
        chunks = health["details"].get("documents", 0)
        add("store", True, f"reachable, {chunks} chunk{'' if chunks == 1 else 's'}")
        stored_dim = health["details"].get("dimension")
        model_dim = None
        if embeds:
            try:
                model_dim = len(self.embeddings.for_config(config).embed_query("eddi-rag doctor dimension probe"))
                add("embeddings", True, f"{config.embeddingProvider} answers")
            except Exception as e:  # noqa: BLE001 - the point is to report it
                where = _endpoint(config)
                add("embeddings", False, self.resolver.redact(f"{config.embeddingProvider} at {where} did not answer: "
                                                              f"{type(e).__name__}: {e}"),
                    f"check that {where} is reachable from this server and embeddingParameters (apiKey, baseUrl, model)")
        if model_dim is None:
            skip("dimensions", because="embeddings")
        elif stored_dim is not None and stored_dim != model_dim:
            add("dimensions", False, f"store holds {stored_dim}-d vectors, model gives {model_dim}-d",
                "Re-embed all (on its Documents page, or POST …/reembed), or use the model the store was built with")
        else:
            add("dimensions", True, f"{model_dim}-d" + ("" if stored_dim else " (store empty)"))
        if chunks:
            add("documents", True, f"{chunks} chunk{'' if chunks == 1 else 's'}")
        else:
            add("documents", True, "no documents yet: the knowledge base answers nothing",
                "upload documents on its Documents page, or POST …/ingest", level="warning")
        failing = self.failing(kb_id)
        if failing:
            shown = ", ".join(failing[:3]) + (f" and {len(failing) - 3} more" if len(failing) > 3 else "")
            add("ingestions", True, f"{len(failing)} document(s) failed to ingest: {shown}",
                "open Documents: see why, retry, replace the file or remove it", level="warning")
        else:
            add("ingestions", True, "none failed")
        problems = self.sources(kb_id) if config.sources else []
        for p in problems:
            add("sources", p["level"] != "failed", p["detail"], p["fix"], level=p["level"])
        if not problems:
            add("sources", True, f"{len(config.sources)} source(s): their last runs read everything they listed" if config.sources
                else "none: documents are added by hand or by its agents")
        self._acl(kb_id, config, add)
        return out

    def _acl(self, kb_id: str, config: RagConfiguration, add: Callable[..., bool]) -> None:
        """Who may read it: under DOCUMENT_ACL, the chunks no one may read (no ACL, or one without a grant); a knowledge
        base that reads by permissions on a server that asks nobody who they are."""
        if config.audience == AGENT_USERS:
            add("acl", True, "everyone who may talk to its agents reads it (audience AGENT_USERS)")
            return
        if not self.authenticated():
            add("acl", True, f"audience {config.audience} on a server with auth off: every caller is trusted and a userId "
                "is taken as said", "create an API key or configure OIDC before relying on permissions (docs/permissions.md)",
                level="warning")
            return
        if config.audience == OWNER:
            add("acl", True, f"read by its owner {config.owner} alone")
            return
        said, scanned = self._no_reader(kb_id, config)
        if said:
            add("acl", True, f"{said}{'; aclMode warn reads them all meanwhile' if config.aclMode == 'warn' else ''}", NO_READER_FIX,
                level="warning")
        else:
            add("acl", True, f"every chunk{scanned} has a reader (audience DOCUMENT_ACL, aclMode {config.aclMode})")

    def _no_reader(self, kb_id: str, config: RagConfiguration) -> tuple[str, str]:
        """(what says the chunks nobody may read, "" when none; which chunks were scanned)."""
        chunks = self.stores.get(kb_id, config).get(limit=ACL_SCAN + 1)
        unread = [c for c in chunks[:ACL_SCAN] if not _granted(c.metadata.get(ACL))]
        scanned = f" (of the first {ACL_SCAN:,})" if len(chunks) > ACL_SCAN else ""
        if not unread:
            return "", scanned
        documents = sorted({str(c.metadata.get("document_id")) for c in unread})
        shown = ", ".join(documents[:3]) + (f" and {len(documents) - 3} more" if len(documents) > 3 else "")
        return f"{len(unread)} chunk(s){scanned} of {len(documents)} document(s) have no reader: {shown}", scanned

    def _secrets(self, data: dict[str, Any], config: RagConfiguration, add: Callable[..., bool]) -> bool:
        if scrubbed := list(redacted_paths(data)):
            return add("secrets", False, f"{', '.join(scrubbed)}: {REDACTED}, a secret an EDDI export scrubbed",
                       "put the secret in the tenant's vault (README: Secrets), reference it as ${vault:<key>} there, "
                       "then save a new version")
        try:
            resolve_parameters(config.embeddingParameters, self.resolver, config.tenant)
            resolve_parameters(config.storeParameters, self.resolver, config.tenant)
        except SecretNotFoundError as e:
            vaulted = VAULTED.search(str(e))
            if "names the vault of tenant" in str(e):
                return add("secrets", False, str(e), "reference a key of this knowledge base's own tenant: store it there "
                                                     f"(PUT /secretstore/secrets/{config.tenant}/<key>) and name it ${{vault:<key>}}")
            if vaulted and not self.resolver.vault_on:
                return add("secrets", False, str(e), "the operator turns the vault on (sets EDDI_VAULT_MASTER_KEY and restarts), "
                                                     "then the key is stored: PUT /secretstore/secrets/"
                                                     f"{config.tenant}/{vaulted.group(1).rsplit('/', 1)[-1]}; or the operator "
                                                     "sets the environment variable the message names")
            if vaulted:  # a key the tenant stores itself
                key = vaulted.group(1).rsplit("/", 1)[-1]
                return add("secrets", False, str(e), f"store the key in the vault: PUT /secretstore/secrets/{config.tenant}/{key} "
                                                     "{\"value\": \"…\"} (the Manager: Configuration, the field's Store in vault)")
            return add("secrets", False, str(e), "set the environment variable and list it in EDDI_RAG_SECRET_ENV (the "
                                                 "operator's), or put the key in the tenant's vault (PUT /secretstore/secrets/"
                                                 f"{config.tenant}/<key>) and reference it as ${{vault:<key>}}")
        return add("secrets", True, "all references resolve")

    def unresolved(self, kb_id: str) -> dict[str, str] | None:
        """The secrets check alone: {check, detail, fix} when a reference does not resolve (the configuration is saved:
        an EDDI client may store the key after it), or the store could not be checked; None when neither."""
        problem = self.unresolved_in(self.resources.read("rags", kb_id), self.resources.tenant_of("rags", kb_id))
        ownership = self.stores.ownership
        if problem is None and ownership is not None and any(c["how"] == UNVERIFIED for c in ownership.of_kb(kb_id)):
            return {"check": "store", "detail": "saved without checking that the store it names is its own: the store "
                                                "could not be reached (down, a host not resolvable here yet, or its key "
                                                "not stored yet)",
                    "fix": "nothing now: its first use checks it before anything is read or written (a store that exists "
                           "already then needs an admin to save with ?adopt=true); `eddi-rag doctor` checks it as soon "
                           "as the store can be reached"}
        return problem

    def save_warnings(self, kb_id: str) -> list[dict[str, str]]:
        """What a save answers beside the new version: each thing that keeps the knowledge base from answering as
        its author likely expects, {check, detail, fix} (``unresolved``, then ``KnowledgeBases.warnings``)."""
        problem = self.unresolved(kb_id)
        said = [{"check": "configuration", "detail": f"{w['path']}: {w['message']}", "fix": w["fix"]}
                for w in self.kbs.warnings(self.resources.read("rags", kb_id))]
        return [problem, *said, *self._unread(kb_id)] if problem else [*said, *self._unread(kb_id)]

    def _unread(self, kb_id: str) -> list[dict[str, str]]:
        """Under DOCUMENT_ACL, the documents nobody may read (a knowledge base switched to it hides every document
        that has no readers yet): said at the save that does it."""
        try:
            config = self.kbs.get(kb_id)
            said = self._no_reader(kb_id, config)[0] if config.audience == DOCUMENT_ACL else ""
        except Exception as e:  # noqa: BLE001 - a store out of reach is the doctor's to say, not the save's
            log.debug("no ACL scan of %s at save: %s", kb_id, self.redact(str(e)))
            said = ""
        return [{"check": "acl", "detail": f"audience DOCUMENT_ACL: {said}: nobody reads them now", "fix": NO_READER_FIX}] if said else []

    def unresolved_in(self, data: dict[str, Any], tenant: str) -> dict[str, str] | None:
        """``unresolved`` for a configuration not saved yet (the Manager's create dialog refuses it then)."""
        try:
            config = self.kbs.substituted(self.kbs.resolve_embedding(self.kbs.validate(data).in_tenant(tenant), tenant), tenant)
        except EddiRagError:
            return None  # (the doctor's other checks say what is wrong)
        found: list[dict[str, str]] = []

        def add(check: str, ok: bool, detail: str, fix: str = "", level: str = "") -> bool:
            if not ok:
                found.append({"check": check, "detail": detail, "fix": fix})
            return ok

        self._secrets(data, config, add)
        return found[0] if found else None

    @contextmanager
    def explained(self, kb_id: str) -> Iterator[None]:
        """Run a search of ``kb_id``; a failure that is not the request's own (a 4xx other than a missing
        secret) is answered with the doctor's reason and fix (``why_not``)."""
        try:
            yield
        except EddiRagError as e:
            if e.status < 500 and not isinstance(e, (SecretNotFoundError, DimensionMismatchError)):
                raise
            raise self.why_not(kb_id, e) from e
        except Exception as e:  # noqa: BLE001 - an engine's or a provider's own error: the doctor says why
            raise self.why_not(kb_id, e) from e

    def why_not(self, kb_id: str, error: Exception) -> EddiRagError:
        """The doctor's first failed check as a ``KnowledgeBaseNotReadyError``; when every check passes (a
        passing fault), ``error`` itself if it is a product error, else a 503 naming it."""
        try:
            checks = self.checks(kb_id)
        except Exception:  # noqa: BLE001 - the doctor itself could not run: say what failed
            checks = []
        name = self.resources.read("rags", kb_id).get("name", kb_id) if checks else kb_id
        for c in checks:
            if c.level == "failed":
                status = 503 if c.check in ("store", "embeddings") and "disabled" not in c.detail else 409
                return KnowledgeBaseNotReadyError(kb_id, name, c.check, c.detail, c.fix, status)
        if isinstance(error, EddiRagError):
            return error
        if isinstance(error, (ConnectionError, TimeoutError)) or type(error).__name__ in UNAVAILABLE:
            return KnowledgeBaseNotReadyError(kb_id, name, "search", self.redact(f"{type(error).__name__}: {error}"),
                                              "try again; if it keeps failing, open Health for this knowledge base", 503)
        # every check passes and nothing was out of reach: a fault of this product on this question, not a server down
        log.exception("a search of knowledge base %s failed", kb_id, exc_info=error)
        return KnowledgeBaseNotReadyError(kb_id, name, "search", self.redact(f"{type(error).__name__}: {error}"),
                                          "this is a fault of eddi-rag on this question (the knowledge base itself is "
                                          "healthy): report it with the question; trying again will not help", 500)

    def verdict(self, kb_id: str, curator: bool = True) -> dict[str, Any]:
        """One verdict from every check (``verdict``), with the checks; not ``curator`` (a viewer of a knowledge base
        that reads by permissions): what the checks say of its chunks and documents is for its editors."""
        checks = self.checks(kb_id) if curator else self.reader_checks(kb_id)
        return {**verdict(checks), "checks": [c.to_json() for c in checks]}

    def reader_checks(self, kb_id: str) -> list[Check]:
        """``checks`` as a viewer sees them: of a knowledge base whose audience is OWNER or DOCUMENT_ACL, the details
        that count or name its chunks and documents are left out (a count is a side channel)."""
        checks = self.checks(kb_id)
        if self.kbs.get(kb_id).audience == AGENT_USERS:
            return checks
        return [replace(c, detail="shown to its editors", fix="") if c.check in COUNTING else c for c in checks]

    def all_checks(self) -> list[Check]:
        """``checks`` of every knowledge base."""
        return [c for kb in sorted(self.resources.ids("rags")) for c in self.checks(kb)]
