"""Export an agent the way EDDI's ``POST /backup/export/{agentId}`` does, so EDDI (or we) can import it.

The zip's layout (labsai/EDDI ``RestExportService``, read by ``eddi_import``): ``<agentId>.agent.json`` and
``<agentId>.descriptor.json`` at the root; per workflow ``<workflowId>/<version>/<workflowId>.workflow.json``
(+ descriptor) and beside it each configuration a step names that we model, ``<id>.rag.json``,
``<id>.httpcalls.json``, ``<id>.langchain.json`` (+ descriptors); what an import kept (behaviour rules, outputs,
dictionaries, property setters, snippets, schedules, …) goes back byte for byte where it came from. Sources of
our own types (folder, sitemap), which EDDI refuses, are left out and listed in ``eddi-rag-export-notes.json``
(our import puts them back). URIs are written in EDDI's form. Literal
secrets become ``${vault:REDACTED}`` as EDDI's ``SecretScrubber`` decides: a field named like a credential
(``apiKey``, ``password``, ``…Token`` but ``maxTokens`` …; in a header map also ``…Key``), a URL's user
information and credential query parameters, and key-like strings of high entropy outside structural and
descriptive fields (a model, table or collection name is never redacted, where EDDI's scrubber would);
references (``${vault:…}``, ``${eddivault:…}``, ``${env:…}``, ``${vars:…}``) stay. Vectors, uploaded files and
ingestion state are not exported (EDDI's do not carry them either)."""

from __future__ import annotations

import io
import ipaddress
import json
import math
import re
import zipfile
from collections import Counter
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from eddi_rag.backends import registry
from eddi_rag.common.outbound import literal_address
from eddi_rag.common.secrets import REDACTED
from eddi_rag.errors import EddiRagError
from eddi_rag.resource_types import Descriptor, parse_uri, resource_uri
from eddi_rag.resources import ResourceStore
from eddi_rag.stores.ownership import location_errors
from eddi_rag.workflow.traversal import workflow_steps

FILE_EXTENSIONS = {"rags": "rag", "httpcalls": "httpcalls", "llm": "langchain"}  # as EDDI's export names them
NOTES = "eddi-rag-export-notes.json"  # what the export left out for EDDI's sake, which our import puts back
EDDI_SOURCE_TYPES = ("web", "upload")  # the source types EDDI has; every other connector is ours alone
_SECRET_NAMES = {"apikey", "apitoken", "password", "passwd", "secret", "secretkey", "secretaccesskey", "accountkey",
                 "token", "accesstoken",
                 "authorization", "auth", "credential", "credentials", "privatekey", "clientsecret"}
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "credential", "credentials", "authorization")
_QUANTITIES = ("max", "min", "num", "number", "total", "budget", "batch")  # maxTokens counts tokens, it is none
_STRUCTURAL = {"type", "subtype", "name", "action", "actions", "expressions", "fromobjectpath", "toobjectpath",
               "behaviorrulename", "scope", "uri", "occurrence",
               # what names a model, a place or a choice is never a credential, however random it looks
               # (EDDI's scrubber redacts text-embedding-3-large: an improvement on it, README: EDDI exports)
               "model", "modelname", "modelid", "deploymentname", "collectionname", "tablename", "table", "indexname",
               "textindexname", "databasename", "database", "storenamespace", "storetype", "embeddingprovider",
               "embeddingproviderid", "chunkstrategy", "reranker", "description", "id", "region", "tasktype",
               # what a source or a provider names that is no secret (point 7 of issue 42: a user agent, a path
               # prefix, a folder, an OpenAI organisation or project were redacted as random-looking)
               "useragent", "pathprefix", "path", "folder", "organizationid", "organization", "projectid", "project",
               "location", "bucket", "prefix", "branch", "include", "exclude", "excludepatterns", "cron",
               "documentname", "source", "sourceid", "tenant", "tenantname", "host", "dimension", "dimensions"}
_HEADER_SECRETS = ("key", "cookie", "signature")
_KEY_LIKE = re.compile(r"[a-zA-Z0-9_.+/~$\-]{14,1022}")
_REFERENCE = re.compile(r"\$\{(vault|eddivault|env|vars):")


def _norm(name: str) -> str:
    return re.sub(r"[-._]", "", name.lower())


def secret_field(name: str | None, parent: str | None = None) -> bool:
    """Whether a value under ``name`` (in an object under ``parent``) is a credential by its name."""
    if not name:
        return False
    norm = _norm(name)
    for n in {norm, norm[:-1] if norm.endswith("s") else norm}:
        if n in _SECRET_NAMES or (n.endswith(_SECRET_SUFFIXES) and not n.startswith(_QUANTITIES)):
            return True
    return parent is not None and _norm(parent).endswith("headers") and norm.endswith(_HEADER_SECRETS)


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _scrub_url(url: str) -> str:
    parts = urlsplit(url.strip())
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rsplit('@', 1)[1]}"
    query = [(k, REDACTED if secret_field(k) or _norm(k) in ("key", "apikey", "sig", "signature") else v)
             for k, v in parse_qsl(parts.query, keep_blank_values=True)]
    out = urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="${}:") if query else parts.query,
                      parts.fragment))
    return out if out != urlunsplit(urlsplit(url.strip())) else url


def _scrub_text(name: str | None, parent: str | None, text: str, names_only: bool = False) -> str:
    if _REFERENCE.search(text):
        return text
    if secret_field(name, parent):
        return REDACTED
    if text.strip().lower().startswith(("http://", "https://")):
        return _scrub_url(text)
    if names_only or (name is not None and _norm(name) in _STRUCTURAL):
        return text
    if _KEY_LIKE.fullmatch(text) and _entropy(text) > 3.5:
        return REDACTED
    return text


def scrub(value: Any, name: str | None = None, parent: str | None = None, names_only: bool = False) -> Any:
    """``value`` with its literal secrets replaced by ``${vault:REDACTED}`` (EDDI's rules, see the module doc).
    A field is judged by what it is: a credential by its name, a URL by its user and key parameters, and a
    key-like string of high entropy only in a field this product does not know as something else (a model, a
    path, a user agent, an organisation …). ``names_only``: by name and URL alone (the export's notes, which hold
    what EDDI would refuse as it is here)."""
    if isinstance(value, dict):
        return {k: _scrub_text(k, name, v, names_only) if isinstance(v, str) else scrub(v, k, name, names_only)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_text(name, None, v, names_only) if isinstance(v, str) else scrub(v, name, parent, names_only)
                for v in value]
    return value


def canonical_uris(value: Any) -> Any:
    """``value`` with every resource URI in EDDI's current form (ours before, and v5's, rewritten)."""
    if isinstance(value, dict):
        return {k: canonical_uris(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical_uris(v) for v in value]
    if isinstance(value, str) and value.startswith("eddi://"):
        try:
            ref = parse_uri(value)
        except ValueError:
            return value
        return resource_uri(ref.kind, ref.id, ref.version)
    return value


def _descriptor(d: Descriptor, uri: str) -> dict[str, Any]:
    return {**d.to_json(), "resource": uri}


def _ours_only(source: Any) -> bool:
    """Whether EDDI's import would refuse a source: of a type EDDI does not have (a folder, a sitemap), or a web source
    whose start URL or a sitemap is a local or private address (``IngestionSource.WebSource.requireRoutableHost``)."""
    if not isinstance(source, dict):
        return False
    kind = source.get("type")
    blocks = [k for k, v in source.items() if isinstance(v, dict) and k not in ("web", "upload", "settings")]
    if (isinstance(kind, str) and kind not in EDDI_SOURCE_TYPES) or (kind is None and blocks):
        return True
    web = source.get("web")
    urls = [web.get("startUrl"), *(web.get("sitemapUrls") or [])] if isinstance(web, dict) else []
    return any(isinstance(u, str) and not routable(u) for u in urls)


def routable(url: str) -> bool:
    """Whether EDDI saves ``url`` as a web source's start URL or sitemap: its host is no literal loopback, site-local,
    link-local or any-local address, nor ``localhost`` (literals only: EDDI resolves no name at save; a literal is
    digits and dots, or holds a colon, as EDDI tells them, read as a resolver reads it: ``outbound.literal_address``)."""
    host = (urlsplit(url).hostname or "").strip("[]")
    if host.lower() == "localhost":
        return False
    literal = all(ch == "." or ch.isdigit() for ch in host) or ":" in host
    address = literal_address(host) if literal and host else None
    if address is None:
        return True  # a name: EDDI's crawler checks it per request
    site_local = any(address in network for network in SITE_LOCAL if network.version == address.version)
    return not (address.is_loopback or address.is_link_local or address.is_unspecified or site_local)


SITE_LOCAL = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fec0::/10"))  # Java's


# What EDDI's RagConfiguration models (labsai/EDDI configs/rag/model/RagConfiguration.java, IngestionSource.java):
# a field beyond these is dropped by its import, so an export keeps ours in its notes, which our import puts back.
EDDI_FIELDS = frozenset({"name", "embeddingProvider", "embeddingParameters", "storeType", "storeParameters", "storeNamespace",
                         "chunkStrategy", "chunkSize", "chunkOverlap", "maxResults", "minScore", "sources"})
EDDI_SOURCE_FIELDS = {"": frozenset({"id", "name", "enabled", "type", "web", "upload", "settings", "cron"}),
                      "web": frozenset({"startUrl", "sameSiteOnly", "includeSubdomains", "pathPrefix", "maxDepth", "maxPages",
                                        "excludePatterns", "sitemapUrls", "requestDelayMs", "timeoutSeconds", "userAgent",
                                        "respectRobots"}),
                      "upload": frozenset({"maxFiles", "maxFileBytes", "maxTotalBytes"}),
                      "settings": frozenset({"maxContentLength", "tombstoneAfterMissedRuns", "maxSegmentsPerRun",
                                             "costPerThousandSegments", "maxBytesPerPage", "timeBudgetMinutes"})}


def eddi_source(source: dict[str, Any]) -> dict[str, Any]:
    """A web or upload source as EDDI models it: the fields it does not (ours: ``settings.acl``, ``web.include`` …)
    left out."""
    out = {k: v for k, v in source.items() if k in EDDI_SOURCE_FIELDS[""]}
    for block in ("web", "upload", "settings"):
        if isinstance(out.get(block), dict):
            out[block] = {k: v for k, v in out[block].items() if k in EDDI_SOURCE_FIELDS[block]}
    return out


# What EDDI's import accepts of a RagConfiguration (labsai/EDDI configs/rag/model/RagConfiguration.java: validate()
# refuses an embeddingProvider outside SUPPORTED_EMBEDDING_PROVIDERS and a chunkStrategy outside recursive and the
# legacy paragraph/sentence; its store factory builds only these storeTypes).
EDDI_PROVIDERS = ("openai", "azure-openai", "ollama", "mistral", "bedrock", "cohere", "gemini", "vertex")
EDDI_STORES = ("in-memory", "pgvector", "mongodb-atlas", "elasticsearch", "qdrant", "chroma")
EDDI_CHUNKING = ("recursive", "paragraph", "sentence")
# The parameter that names a store's place in EDDI (KnowledgeBaseStorage.physicalNameParameter): its import refuses one
# KnowledgeBaseStorageGuard refuses (a ${…} reference, a name in its reserved eddi_kb namespace, a pgvector table that is
# no plain identifier), so such a place, stored here before the rule, is left out (EDDI's nearest: a store of its own).
EDDI_LOCATION = {"pgvector": "table", "mongodb-atlas": "collectionName", "qdrant": "collectionName", "chroma": "collectionName",
                 "elasticsearch": "indexName"}
# EDDI's nearest to a provider of ours: the same model where EDDI can run it (Ollama serves all-MiniLM-L6-v2 as
# all-minilm), the same service under EDDI's name.
NEAREST_PROVIDER = {"local": ("ollama", {"model": "all-minilm"}), "google": ("gemini", None)}


class ExportRefusedError(EddiRagError, ValueError):
    """A configuration EDDI would refuse, with no nearest value of EDDI's to write (HTTP 409, naming the fields)."""
    status = 409


def eddi_compatible(data: dict[str, Any], where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """``data`` (a RagConfiguration) as EDDI's import accepts it, and the fields it changed with their values here
    (kept in the export's notes, put back by our import): EDDI's nearest embedding provider (with its parameters),
    ``in-memory`` for a store EDDI does not have (its parameters left out: the documents are ingested again there),
    ``recursive`` for a chunking EDDI does not do. ExportRefusedError when a field has no nearest value."""
    out, replaced = dict(data), dict[str, Any]()
    provider = data.get("embeddingProvider")
    if isinstance(provider, str) and provider.strip() and provider.strip() not in EDDI_PROVIDERS:
        if provider not in NEAREST_PROVIDER:
            raise ExportRefusedError(f"{where}: embeddingProvider {provider!r} has no counterpart in EDDI (it runs "
                                     f"{', '.join(EDDI_PROVIDERS)}): choose one of those before exporting")
        nearest, params = NEAREST_PROVIDER[provider]
        replaced["embeddingProvider"] = provider
        out["embeddingProvider"] = nearest
        if params is not None:
            replaced["embeddingParameters"] = data.get("embeddingParameters")
            out["embeddingParameters"] = params
    params = out.get("embeddingParameters")
    if isinstance(out.get("embeddingProvider"), str) and isinstance(params, dict) and \
            (ignored := {e["path"].rsplit(".", 1)[-1] for e in registry.ignored_endpoints(out["embeddingProvider"], params)}):
        replaced.setdefault("embeddingParameters", data.get("embeddingParameters"))  # (stored before EDDI refused them)
        out["embeddingParameters"] = {k: v for k, v in params.items() if k not in ignored}
    if data.get("storeType", "in-memory") not in EDDI_STORES:
        replaced["storeType"], replaced["storeParameters"] = data["storeType"], data.get("storeParameters")
        out["storeType"] = "in-memory"
        out.pop("storeParameters", None)
    key, params = EDDI_LOCATION.get(out.get("storeType", "in-memory")), out.get("storeParameters")
    if key and isinstance(params, dict) and isinstance(params.get(key), str) and location_errors(out["storeType"], {key: params[key]}):
        replaced.setdefault("storeParameters", data.get("storeParameters"))
        out["storeParameters"] = {k: v for k, v in params.items() if k != key}
    strategy = data.get("chunkStrategy")
    if isinstance(strategy, str) and strategy.strip() and strategy.strip().lower() not in EDDI_CHUNKING:
        replaced["chunkStrategy"] = strategy
        out["chunkStrategy"] = "recursive"
    for field in list(out):  # ours (searchMode, contextExpansion, audience …): EDDI's import would drop them
        if field not in EDDI_FIELDS:
            replaced.setdefault(field, data[field])
            out.pop(field)
    sources = out.get("sources")
    if isinstance(sources, list) and any(isinstance(s, dict) and eddi_source(s) != s for s in sources):
        replaced["sources"] = sources  # (each with the fields of ours EDDI's import would drop)
        out["sources"] = [eddi_source(s) if isinstance(s, dict) else s for s in sources]
    return {k: v for k, v in out.items() if v is not None}, {k: v for k, v in replaced.items()}


def _references(value: Any) -> str:
    """Every string of ``value`` (what a kept file's id is looked for in)."""
    return json.dumps(value, ensure_ascii=False)


def export_agent(resources: ResourceStore, agent_id: str, tenant: str | None = None) -> bytes:
    """The zip of agent ``agent_id`` (its current version), its workflows and the RAG, LLM and httpCall
    configurations their steps name, in EDDI's layout (see the module doc), with the files an import kept as
    they came (behaviour rules, outputs, dictionaries, … that a workflow version still names; snippets and
    schedules). Sources of types EDDI lacks are left out of their RagConfiguration and listed in ``NOTES``."""
    files: dict[str, Any] = {}
    left_out: list[dict[str, Any]] = []

    def add(path: str, kind: str, id: str, version: int) -> dict[str, Any]:
        data = resources.read(kind, id, version, tenant=tenant)
        body = data
        if kind == "rags":
            sources = data.get("sources") or []
            body, replaced = eddi_compatible({**data, "sources": [s for s in sources if not _ours_only(s)]}, path)
            ours = [s for s in sources if _ours_only(s)]
            if "sources" not in data:
                body.pop("sources", None)
            if ours or replaced:  # what EDDI would refuse, kept as it is here (never scrubbed but for credentials)
                left_out.append({"file": path, **({"sources": [scrub(s, names_only=True) for s in ours]} if ours else {}),
                                 **({"replaced": scrub(replaced, names_only=True)} if replaced else {})})
        files[path] = scrub(canonical_uris(body))
        files[path.rsplit(".", 2)[0] + ".descriptor.json"] = _descriptor(resources.descriptor(kind, id, tenant),
                                                                         resource_uri(kind, id, version))
        return data

    def add_kept(folder: str, kind: str, id: str, named: str | None) -> None:
        """The files kept with ``kind/id`` at its import; with ``named``, only those whose id it still names."""
        for path, body in resources.kept(kind, id).items():
            if named is None or PurePosixPath(path).name.split(".", 1)[0] in named:
                files.setdefault(f"{folder}{path}", body)

    version = resources.current_version("agents", agent_id, tenant=tenant)
    agent = add(f"{agent_id}.agent.json", "agents", agent_id, version)
    for uri in agent.get("workflows") or []:
        ref = parse_uri(uri)
        folder = f"{ref.id}/{ref.version}/"
        workflow = add(f"{folder}{ref.id}.workflow.json", "workflows", ref.id, ref.version)
        for step in workflow_steps(workflow):
            config = step.get("config")
            uri = config.get("uri") if isinstance(config, dict) else None
            try:
                target = parse_uri(str(uri))
            except ValueError:
                continue
            if target.kind in FILE_EXTENSIONS:
                add(f"{folder}{target.id}.{FILE_EXTENSIONS[target.kind]}.json", target.kind, target.id, target.version)
        add_kept(folder, "workflows", ref.id, _references(workflow))
    add_kept("", "agents", agent_id, None)
    if left_out:
        files[NOTES] = {"note": "What EDDI would refuse is left out of these RagConfigurations (sources of types EDDI does "
                                "not have: a folder on the server, a sitemap; a web source on a local or private address) "
                                "or written as EDDI's nearest value, and the fields EDDI does not model (searchMode, "
                                "contextExpansion …) are kept here rather than dropped by its import (replaced: the values "
                                "here), so EDDI imports them; eddi-rag's import puts them back. "
                                "EDDI has no audience yet: it reads every knowledge base as AGENT_USERS (everyone who "
                                "may talk to the agent), whatever audience is replaced here.",
                        "leftOut": left_out}
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, body in files.items():
            archive.writestr(path, body if isinstance(body, bytes) else json.dumps(body, indent=2, ensure_ascii=False))
    return out.getvalue()
