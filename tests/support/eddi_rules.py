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
- issue 67, point 7: ``configs/rag/rest/KnowledgeBaseStorageGuard.java`` (commit 26be822, the review of PR #945, after
  the isolation change of 2026-10-02/03) ``requireUsableExplicitLocation``, run by create, duplicate, the import's
  create path and an update that changes the location or the store type: a location containing ``${`` is refused
  first ("must be a literal name"), then the pgvector identifier, then the reserved prefix, then a location another
  knowledge base uses that the caller ``cannot edit`` (``collisionKey``: the store type and the name trimmed and
  lower-cased, pgvector's ``public.`` left out: ``public.Team_Docs`` is ``team_docs``; not checkable on one export); a
  stored reference is not judged again, what it resolves to is checked where the store is built
  (``EmbeddingStoreFactory.physicalName``). ``KnowledgeBaseStorage.filtersRetrieval`` (commit 054d271): the ``"id"``
  layout filters on ``kbId``, on mongodb-atlas only with an explicit ``collectionName`` (``atlas_filters_retrieval``);
- issue 67, point 9: EDDI 6.6's LLM task fields ``maxToolCallsPerIteration`` and ``maxToolCallsPerTurn`` (Integer;
  defaults 20 and 100, as shared/EDDI-REFERENCE.md read them in EDDI's tests, Manager and changelog: the
  ``LlmConfiguration.java`` the search index holds predates them) beside the task's fields of
  ``modules/llm/model/LlmConfiguration.java`` (the August 2026 snapshot), and a property's typed slots
  (``configs/properties/model/PropertyValues.java``: ``valueLong``, ``valueDouble`` beside ``Property.java``'s
  ``valueString``, ``valueObject``, ``valueList``, ``valueInt``, ``valueFloat``, ``valueBoolean``), in a task's
  ``postResponse.propertyInstructions`` (``PropertyInstruction.java``); REST refuses a field the model does not
  have (``StrictConfigurationBodyInterceptor``), an import drops it (``llm_dropped``); a slot holding what its Java
  type does not (a fraction in ``valueLong``, a number past its range) is refused or changed (``llm_refusals``);
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
TASK_FIELDS = {"actions", "id", "type", "description", "preRequest", "parameters", "responseObjectName", "responseMetadataObjectName",
               "postResponse", "tools", "a2aAgents", "enableBuiltInTools", "enableHttpCallTools", "enableMcpCallTools",
               "builtInToolsWhitelist", "toolLoadingStrategy", "maxToolsInContext", "conversationHistoryLimit", "maxContextTokens",
               "anchorFirstSteps", "conversationSummary", "knowledgeBases", "enableWorkflowRag", "ragDefaults", "httpCallRag",
               "maxRagContextChars", "maxSystemPromptChars", "retry", "maxBudgetPerConversation", "enforceBudget", "toolPricing",
               "inputPricePer1M", "outputPricePer1M", "enableCostTracking", "enableToolCaching", "enableRateLimiting",
               "defaultRateLimit", "toolRateLimits", "toolCacheScopes", "defaultToolCacheScope", "maxToolIterations",
               "maxToolContextTokens", "jsonResponseFormat", "modelCascade", "toolResponseLimits", "counterweight",
               "identityMasking", "responseValidation", "streamingTimeoutSeconds", "multimodal", "toolApprovals",
               "maxToolCallsPerIteration", "maxToolCallsPerTurn"}  # (the last two: 6.6)
TASK_INTEGERS = {"maxToolCallsPerIteration": 2**31, "maxToolCallsPerTurn": 2**31}  # Integer: [-2^31, 2^31)
PROPERTY_FIELDS = {"name", "valueString", "valueObject", "valueList", "valueInt", "valueLong", "valueFloat", "valueDouble",
                   "valueBoolean", "scope", "visibility", "fromObjectPath", "toObjectPath", "convertToObject", "override",
                   "runOnValidationError", "httpCodeValidator"}
PROPERTY_WHOLE = {"valueInt": 2**31, "valueLong": 2**63}  # Integer, Long
PROPERTY_NUMBERS = ("valueFloat", "valueDouble")
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
        if "${" in location:
            out.append(f"storeParameters.{key} {location!r} must be a literal name, not a ${{...}} reference")
        if any(part.strip().startswith("eddi_kb") for part in location.strip().lower().split(".")):
            out.append(f"storeParameters.{key} {location!r} is in EDDI's reserved namespace")
        if store == "pgvector" and "${" not in location and not PG_QUALIFIED_IDENTIFIER.fullmatch(location.strip()):
            out.append(f"storeParameters.table {location!r} is not a plain identifier")
    return out


def atlas_filters_retrieval(config: dict[str, Any]) -> bool:
    """``KnowledgeBaseStorage.filtersRetrieval`` for a mongodb-atlas knowledge base: the "id" layout, and a collection named."""
    name = (config.get("storeParameters") or {}).get("collectionName")
    return config.get("storeNamespace") == "id" and isinstance(name, str) and bool(name.strip())


def _instructions(task: dict[str, Any]) -> list[Any]:
    post = task.get("postResponse")
    found = post.get("propertyInstructions") if isinstance(post, dict) else None
    return found if isinstance(found, list) else []


def llm_dropped(config: dict[str, Any]) -> list[str]:
    """The fields of an LLM configuration's tasks (and their property instructions) EDDI's model lacks: its import drops
    them, its REST refuses them."""
    out = []
    for i, task in enumerate(config.get("tasks") or []):
        out += [f"$.tasks[{i}].{k}" for k in task if k not in TASK_FIELDS]
        for j, instruction in enumerate(_instructions(task)):
            out += [f"$.tasks[{i}].postResponse.propertyInstructions[{j}].{k}" for k in instruction if k not in PROPERTY_FIELDS]
    return out


def _whole(value: Any, bound: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and -bound <= value < bound


def llm_refusals(config: dict[str, Any]) -> list[str]:
    """What of an LLM configuration EDDI would refuse or not read as it is: a task field or a property slot holding what
    its Java type does not (Jackson refuses a number past the range, truncates a fraction into an Integer or Long)."""
    out = []
    for i, task in enumerate(config.get("tasks") or []):
        out += [f"$.tasks[{i}].{k} is not an Integer: {task[k]!r}" for k, bound in TASK_INTEGERS.items()
                if k in task and task[k] is not None and not _whole(task[k], bound)]
        for j, instruction in enumerate(_instructions(task)):
            where = f"$.tasks[{i}].postResponse.propertyInstructions[{j}]"
            out += [f"{where}.{k} is not whole or out of range: {instruction[k]!r}" for k, bound in PROPERTY_WHOLE.items()
                    if instruction.get(k) is not None and not _whole(instruction[k], bound)]
            out += [f"{where}.{k} is not a number: {instruction[k]!r}" for k in PROPERTY_NUMBERS
                    if instruction.get(k) is not None and (isinstance(instruction[k], bool) or not isinstance(instruction[k], (int, float)))]
    return out
