"""EDDI's import rules for a RagConfiguration, transcribed from its source (labsai/EDDI, read 2026-11-27, brought to its
isolation change of 2026-10-02/03 on 2026-11-28) so a test can hold our exports to them; each rule names where it is
read:

- ``configs/rag/model/RagConfiguration.java`` ``validate()``: ``findUnsupportedSettings()`` refuses a non-blank
  ``embeddingProvider`` outside ``SUPPORTED_EMBEDDING_PROVIDERS`` and a non-blank ``chunkStrategy`` outside
  ``SUPPORTED_CHUNK_STRATEGIES`` (``recursive``, case-insensitive) once ``normalizeLegacyChunkStrategy()`` has
  rewritten ``paragraph``/``sentence``; every source passes ``IngestionSource.validate()`` and no two share an
  effective id (id, else name);
- ``configs/rag/model/IngestionSource.java`` ``validate()``: a name; a type of ``web`` (with a ``web`` block whose
  ``startUrl`` is http(s)) or ``upload``; ``WebSource.validate``: ``requireRoutableHost`` on ``startUrl`` and every
  ``sitemapUrls`` entry (a literal loopback, site-local, link-local or any-local address, or ``localhost``: refused; a
  name is not resolved), at most 20 sitemaps, each http(s), ``maxDepth`` 1–20, ``maxPages`` 1–50,000,
  ``timeoutSeconds`` 1–300, ``requestDelayMs`` 0–60,000; ``UploadSource.validate`` and ``IngestionSettings.validate``:
  their limits;
- ``configs/rag/model/EmbeddingParameters.java`` ``findProblem``: for a provider it knows, a key it does not honour
  that names an endpoint (``ENDPOINT_KEYS``, case-insensitive), and ``model``/``modelName`` set to different values;
- ``configs/rag/model/KnowledgeBaseStorage.java`` (the storage guard): an explicit location (pgvector ``table``,
  ``collectionName`` of mongodb-atlas/qdrant/chroma, elasticsearch ``indexName``) any dot-separated part of which
  starts with ``eddi_kb`` (any case) is reserved; a pgvector ``table`` is a plain, optionally schema-qualified
  identifier; an import stamps ``storeNamespace: "id"`` (and drops the archive's over an existing knowledge base), and
  REST create refuses ``"name"`` (``create=True``);
- ``embeddingParameters`` and ``storeParameters`` are ``Map<String, String>``: Jackson reads a scalar into a string,
  an object or a list not at all;
- the store types its ``EmbeddingStoreFactory`` builds (the class' javadoc lists them);
- the fields the model has (``dropped``): its import drops any other, where REST create refuses it."""

from __future__ import annotations

import ipaddress
import re
from typing import Any
from urllib.parse import urlsplit

SUPPORTED_EMBEDDING_PROVIDERS = {"openai", "azure-openai", "ollama", "mistral", "bedrock", "cohere", "gemini", "vertex"}
SUPPORTED_CHUNK_STRATEGIES = {"recursive"}
LEGACY_CHUNK_STRATEGIES = {"paragraph", "sentence"}
STORE_TYPES = {"in-memory", "pgvector", "mongodb-atlas", "elasticsearch", "qdrant", "chroma"}
ENDPOINT_KEYS = {"baseurl", "endpoint", "url", "serverurl", "host", "apibase", "base_url", "api_base", "apiurl"}
HONOURED = {
    "openai": {"model", "modelName", "apiKey", "baseUrl", "timeout", "organizationId", "projectId", "dimensions", "maxRetries"},
    "azure-openai": {"deploymentName", "apiKey", "endpoint", "timeout", "dimensions", "maxRetries"},
    "ollama": {"model", "modelName", "baseUrl", "timeout", "maxRetries"},
    "mistral": {"model", "modelName", "apiKey", "baseUrl", "timeout", "maxRetries"},
    "bedrock": {"model", "modelName", "region", "dimensions"},
    "cohere": {"model", "modelName", "apiKey", "baseUrl", "timeout"},
    "gemini": {"model", "modelName", "apiKey", "baseUrl", "timeout", "maxRetries", "taskType", "outputDimensionality"},
    "vertex": {"model", "modelName", "project", "location", "endpoint", "maxRetries"}}
PHYSICAL_NAME = {"pgvector": "table", "mongodb-atlas": "collectionName", "qdrant": "collectionName",
                 "chroma": "collectionName", "elasticsearch": "indexName"}
PG_QUALIFIED_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_$]{0,62}(?:\.[A-Za-z_][A-Za-z0-9_$]{0,62})?")
FIELDS = {"name", "embeddingProvider", "embeddingParameters", "storeType", "storeParameters", "storeNamespace",
          "chunkStrategy", "chunkSize", "chunkOverlap", "maxResults", "minScore", "sources"}
SOURCE_FIELDS = {"": {"id", "name", "enabled", "type", "web", "upload", "settings", "cron"},
                 "web": {"startUrl", "sameSiteOnly", "includeSubdomains", "pathPrefix", "maxDepth", "maxPages",
                         "excludePatterns", "sitemapUrls", "requestDelayMs", "timeoutSeconds", "userAgent", "respectRobots"},
                 "upload": {"maxFiles", "maxFileBytes", "maxTotalBytes"},
                 "settings": {"maxContentLength", "tombstoneAfterMissedRuns", "maxSegmentsPerRun", "costPerThousandSegments",
                              "maxBytesPerPage", "timeBudgetMinutes"}}


def refusals(config: dict[str, Any], create: bool = False) -> list[str]:
    """Why EDDI's import (``create``: its REST create) would refuse ``config`` (empty: it imports)."""
    out = []
    provider = config.get("embeddingProvider", "openai")
    if isinstance(provider, str) and provider.strip() and provider.strip() not in SUPPORTED_EMBEDDING_PROVIDERS:
        out.append(f"Unsupported embeddingProvider {provider!r}")
    strategy = config.get("chunkStrategy", "recursive")
    if isinstance(strategy, str) and strategy.strip():
        normal = "recursive" if strategy.strip().lower() in LEGACY_CHUNK_STRATEGIES else strategy
        if normal.strip().lower() not in SUPPORTED_CHUNK_STRATEGIES:
            out.append(f"Unsupported chunkStrategy {strategy!r}")
    if config.get("storeType", "in-memory") not in STORE_TYPES:
        out.append(f"no store of type {config.get('storeType')!r}")
    for field in ("embeddingParameters", "storeParameters"):
        for key, value in (config.get(field) or {}).items():
            if isinstance(value, (dict, list)):
                out.append(f"{field}.{key} is not a string")
    out += _embedding_problems(str(provider).strip() if provider else "", config.get("embeddingParameters") or {})
    out += _storage_problems(config, create)
    seen = set()
    for source in config.get("sources") or []:
        name = source.get("name")
        if not name or not str(name).strip():
            out.append("Ingestion source needs a name")
            continue
        kind = source.get("type", "web")
        if kind == "web":
            out += _web_problems(name, source.get("web") or {})
        elif kind == "upload":
            out += _limits(name, source.get("upload") or {}, {"maxFiles": (1, 10_000), "maxFileBytes": (1, 50 * 2**20),
                                                               "maxTotalBytes": (1, 20 * 2**30)})
        else:
            out.append(f"Unsupported ingestion source type {kind!r} on source {name!r}")
        out += _limits(name, source.get("settings") or {}, {"maxContentLength": (1, None), "tombstoneAfterMissedRuns": (1, None),
                                                             "maxSegmentsPerRun": (1, None), "timeBudgetMinutes": (1, 1440),
                                                             "costPerThousandSegments": (0, None), "maxBytesPerPage": (1, None)})
        key = source.get("id") or name
        if key in seen:
            out.append(f"Two ingestion sources share the id or name {key!r}")
        seen.add(key)
    return out


def dropped(config: dict[str, Any]) -> list[str]:
    """The fields EDDI's import would drop (its model has no such field): nothing of ours may be among them."""
    out = [f"$.{k}" for k in config if k not in FIELDS]
    for i, source in enumerate(config.get("sources") or []):
        out += [f"$.sources[{i}].{k}" for k in source if k not in SOURCE_FIELDS[""]]
        for block in ("web", "upload", "settings"):
            out += [f"$.sources[{i}].{block}.{k}" for k in source.get(block) or {} if k not in SOURCE_FIELDS[block]]
    return out


def routable(url: str) -> bool:
    """``WebSource.requireRoutableHost``: literals only (an IP address, or ``localhost``)."""
    host = urlsplit(url).hostname or ""
    if host.lower() == "localhost":
        return False
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return True
    site_local = any(address in ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fec0::/10")
                     if ipaddress.ip_network(n).version == address.version)
    return not (address.is_loopback or address.is_link_local or address.is_unspecified or site_local)


def _web_problems(name: str, web: dict[str, Any]) -> list[str]:
    out = []
    url = web.get("startUrl") or ""
    if not url.startswith(("http://", "https://")):
        return [f"source {name!r}: startUrl must be http or https"]
    if not routable(url):
        out.append(f"startUrl of source {name!r} points at a local or private address")
    sitemaps = web.get("sitemapUrls") or []
    if len(sitemaps) > 20:
        out.append(f"sitemapUrls of source {name!r}: at most 20")
    for sitemap in sitemaps:
        if not isinstance(sitemap, str) or not sitemap.startswith(("http://", "https://")):
            out.append(f"sitemapUrls of source {name!r} must be http or https")
        elif not routable(sitemap):
            out.append(f"sitemapUrls of source {name!r} points at a local or private address")
    return out + _limits(name, web, {"maxDepth": (1, 20), "maxPages": (1, 50_000), "timeoutSeconds": (1, 300),
                                     "requestDelayMs": (0, 60_000)})


def _limits(name: str, block: dict[str, Any], limits: dict[str, tuple[int, int | None]]) -> list[str]:
    out = []
    for field, (low, high) in limits.items():
        value = block.get(field)
        if value is not None and (value < low or (high is not None and value > high)):
            out.append(f"{field} of source {name!r} must be between {low} and {high}, got {value}")
    return out


def _embedding_problems(provider: str, params: dict[str, Any]) -> list[str]:
    if provider not in HONOURED:
        return []
    out = [f"embeddingParameters.{key} is not supported by embedding provider {provider!r}" for key in sorted(params)
           if key not in HONOURED[provider] and key.lower() in ENDPOINT_KEYS]
    model, model_name = params.get("model"), params.get("modelName")
    if model and model_name and model != model_name:
        out.append("embeddingParameters sets both 'model' and 'modelName'")
    return out


def _storage_problems(config: dict[str, Any], create: bool) -> list[str]:
    out = []
    if create and config.get("storeNamespace") == "name":
        out.append("storeNamespace 'name' is not accepted on create")
    store = config.get("storeType", "in-memory")
    key = PHYSICAL_NAME.get(store)
    location = (config.get("storeParameters") or {}).get(key) if key else None
    if isinstance(location, str) and location.strip():
        if any(part.strip().startswith("eddi_kb") for part in location.strip().lower().split(".")):
            out.append(f"storeParameters.{key} {location!r} is in EDDI's reserved namespace")
        if store == "pgvector" and not PG_QUALIFIED_IDENTIFIER.fullmatch(location.strip()):
            out.append(f"storeParameters.table {location!r} is not a plain identifier")
    return out
