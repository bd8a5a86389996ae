"""Configuration models: RagConfiguration and the RAG fields of an LLM task.

The JSON Schema in ``schemas/rag-configuration.schema.json`` is the source of truth for
validation; the pydantic models give typed access with the same defaults (a test keeps
the two in step).
"""

from __future__ import annotations

import difflib
import json
import re
from datetime import datetime, timezone
from functools import cache
from importlib import resources
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from eddi_rag.common import jsonvalues
from eddi_rag.common.outbound import static_endpoint_errors
from eddi_rag.common.principals import parse_acl
from eddi_rag.common.quoting import quoted
from eddi_rag.errors import CONFIGURATION, EddiRagError

SCHEMA_FILE = "rag-configuration.schema.json"
# those that adopt an EDDI store in place (storeNamespace; stores.langchain4j)
LANGCHAIN4J_STORES = ("pgvector", "chroma", "qdrant", "mongodb-atlas")
# Stores with a place of their own that EDDI's layout would name but this product cannot read yet: storeNamespace is
# refused there (ignoring it would hide EDDI's vectors). On the others (in-memory, the embedded ones) a knowledge base's
# store is its own, keyed by its id, whatever the namespace: EDDI stamps "id" on every new one, kept and not used.
NAMESPACE_REFUSED = ("elasticsearch", "typesense")
NO_TEXT_INDEX_IN_EDDI_LAYOUT = ("mongodb-atlas",)  # EDDI's collection there has no text index: vector search alone
# A knowledge base's defaults are the best measured offline (benchmarks/README.md, bench_docs_qa and eval
# --pipeline): Markdown-aware chunks, hybrid search (weighted fusion), 4 neighbours around each hit. A KB on EDDI's
# stored vectors (storeNamespace, or a pgvector table named by EDDI's own `table` parameter) keeps EDDI's (recursive
# chunks, vector search: an adopted EDDI table has no full-text column, and reading its text for every keyword query
# took 776 ms at 20,000 rows against 9.5 ms with one), and a store without keyword
# search (NO_KEYWORD_SEARCH) searches by vector unless told otherwise. A value a configuration names is kept.
EDDI_DEFAULTS = {"chunkStrategy": "recursive", "searchMode": "vector", "fusion": "weighted"}
NO_KEYWORD_SEARCH = ("chroma",)  # (a test checks this against the stores' capabilities)


class ConfigValidationError(EddiRagError, ValueError):
    """A configuration failed validation. ``errors`` is a list of {path, message, value}."""
    status = 400
    failure = CONFIGURATION

    def __init__(self, errors: list[dict[str, Any]]):
        self.errors = errors
        super().__init__("; ".join(f"{e['path']}: {e['message']}" for e in errors))

    def body(self) -> dict[str, Any]:
        return {"error": "invalid configuration", "errors": self.errors}


@cache
def load_schema(name: str = SCHEMA_FILE) -> dict[str, Any]:
    """The packaged JSON Schema (checked against its metaschema by tests/test_config.py, not here: that took 0.35 s of
    every process's start)."""
    text = resources.files("eddi_rag").joinpath("schemas", name).read_text(encoding="utf-8")
    return json.loads(text)


class UploadSource(BaseModel):
    """How much a ``type: upload`` source may hold (EDDI's ``upload`` block)."""
    model_config = ConfigDict(extra="ignore")

    maxFiles: int = 500
    maxFileBytes: int = 25 * 1024 * 1024
    maxTotalBytes: int = 500 * 1024 * 1024


class SourceSettings(BaseModel):
    """What a run may do with what it reads (EDDI's ``settings``)."""
    model_config = ConfigDict(extra="ignore")

    maxContentLength: int = 100_000
    maxBytesPerPage: int = 5 * 1024 * 1024
    maxSegmentsPerRun: int = 20_000
    maxSegmentsPerMonth: int | None = None  # chunks the source's runs may embed in a calendar month (UTC); None: no cap
    costPerThousandSegments: float | None = None
    tombstoneAfterMissedRuns: int = 2
    timeBudgetMinutes: int = 10
    acl: list[str] | None = None  # who may read what it brings, unless the source says per document (retrieval.access)
    permissionSyncMinutes: int = 15  # a source that keeps permissions: how often they are listed again (0: only on request)

    @field_validator("acl")
    @classmethod
    def _trimmed(cls, acl: list[str] | None) -> list[str] | None:
        """As every ACL is read (``principals.parse_acl``): "group:hr " is group:hr, duplicates dropped."""
        return None if acl is None else parse_acl(acl, "settings.acl")


class IngestionSource(BaseModel):
    """Where a knowledge base's documents come from and are kept in sync with (EDDI's ``sources[]``). The block of its
    type (``web``, ``sharepoint`` …) is its connector's to read (``sources.base.Connector.spec``): kept here as given."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, serialize_by_alias=True)

    id: str | None = None  # given on save; EDDI's effectiveId: the id, else the name's slug
    name: str
    type_: str | None = Field(default=None, alias="type")
    enabled: bool = True
    cron: str | None = None  # 5 fields, UTC, e.g. "0 3 * * *"
    schedule: str | None = None  # our older spelling of cron
    upload: UploadSource = Field(default_factory=UploadSource)
    settings: SourceSettings = Field(default_factory=SourceSettings)

    @property
    def type(self) -> str:
        """Its ``type``; absent: the block it holds, else web (EDDI's default)."""
        return self.type_ or next((k for k, v in (self.model_extra or {}).items() if isinstance(v, dict)), "web")

    def block(self, kind: str) -> dict[str, Any] | None:
        """The block named ``kind`` (its connector's configuration), as given."""
        found = (self.model_extra or {}).get(kind)
        return found if isinstance(found, dict) else None

    @property
    def when(self) -> str | None:
        """The cron its scheduled runs follow."""
        return self.cron or self.schedule

    @property
    def effective_id(self) -> str:
        return self.id or slug(self.name)


def slug(name: str) -> str:
    out = "".join(ch if ch.isalnum() else "-" for ch in name.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    return out or "source"


class RagConfiguration(BaseModel):
    """EDDI's ``ai.labs.rag`` resource. Unknown keys are ignored, as EDDI does."""

    model_config = ConfigDict(extra="ignore")

    name: str
    # By name, or by reference to the providers map (embeddingProviderId wins); neither: embedding
    # disabled (eddi_rag.embeddings.references).
    embeddingProvider: str | None = None
    embeddingProviderId: str | None = None
    embeddingParameters: dict[str, Any] = Field(default_factory=dict)
    storeType: str = "in-memory"
    storeParameters: dict[str, Any] = Field(default_factory=dict)
    storeNamespace: str | None = None  # EDDI's layouts, adopted in place (stores.langchain4j); None: ours
    chunkStrategy: str = "markdown"
    chunkSize: int = 512
    chunkOverlap: int = 64
    ocr: str = "auto"  # scans and images: auto (pages without text), always, off
    ocrLanguages: list[str] = Field(default_factory=lambda: ["eng"])  # Tesseract language packs
    language: str | list[str] = "auto"  # the documents' language: auto (detected), an ISO 639-1 code, or codes to detect among
    maxResults: int = 5
    minScore: float = 0.6
    searchMode: str = "hybrid"
    fusion: str = "weighted"
    vectorWeight: float = 0.8  # chosen on three sets after issue 45 changed how the sides combine (benchmarks/README.md)
    maxDistance: float | None = None
    recencyWindow: float = 0.01
    ttlSeconds: float | None = None
    requiredMetadata: list[str] = Field(default_factory=list)
    contextExpansion: str = "neighbors"  # chosen from the claude-docs-qa figures (README)
    expansionNeighbors: int = 4
    maxPassageChars: int = 12000
    reranker: str = "none"
    rerankerParameters: dict[str, Any] = Field(default_factory=dict)
    rerankCandidates: int = 4
    audience: str = "AGENT_USERS"  # who may read (retrieval.access): AGENT_USERS, OWNER, DOCUMENT_ACL
    aclMode: str = "enforce"  # warn: read as AGENT_USERS, count what enforcing would withhold
    owner: str | None = None  # OWNER's principal (user:<id>), set by the server from who created it
    sources: list[IngestionSource] = Field(default_factory=list)

    _disabled: str | None = PrivateAttr(default=None)  # set when the provider reference was resolved to nothing
    _tenant: str = PrivateAttr(default="default")  # whose secrets its references read (set when read from the state)
    _version: int | None = PrivateAttr(default=None)  # the stored version it was read from (None: not read from the state)

    @model_validator(mode="before")
    @classmethod
    def _defaults_for_its_store(cls, data: Any) -> Any:
        """EDDI's defaults on EDDI's stored vectors; vector search on a store without keyword search."""
        if not isinstance(data, dict):
            return data
        params = data.get("storeParameters")
        eddi_table = data.get("storeType") == "pgvector" and isinstance(params, dict) and "table" in params  # EDDI's own parameter
        if (data.get("storeNamespace") and data.get("storeType") in LANGCHAIN4J_STORES) or eddi_table:
            return {**EDDI_DEFAULTS, **data}
        if data.get("storeType") in NO_KEYWORD_SEARCH and "searchMode" not in data:
            return {"searchMode": "vector", **data}
        return data

    @property
    def eddi_layout(self) -> str | None:
        """EDDI's layout of the store this knowledge base reads in place ("name" or "id"), None: this product's own
        (also for a storeNamespace on a store whose chunks are the knowledge base's own, such as in-memory)."""
        return self.storeNamespace if self.storeType in LANGCHAIN4J_STORES else None

    @property
    def embedding_disabled(self) -> str | None:
        """Why this knowledge base has no embedding backend, or None when it has one."""
        if self._disabled:
            return self._disabled
        if not self.embeddingProvider:
            return (f"embeddingProviderId {self.embeddingProviderId!r} is not resolved" if self.embeddingProviderId
                    else "neither embeddingProviderId nor embeddingProvider is set (EDDI would embed with openai; set embeddingProvider)")
        return None

    def with_embedding(self, provider: str | None, parameters: dict[str, Any], disabled: str | None) -> RagConfiguration:
        """This configuration with its embedding reference resolved."""
        out = self.model_copy(update={"embeddingProvider": provider or self.embeddingProvider, "embeddingParameters": parameters})
        out._disabled = disabled
        return out

    @property
    def tenant(self) -> str:
        """The tenant this configuration belongs to: its ``${vault:…}`` references are that tenant's keys."""
        return self._tenant

    @property
    def stored_version(self) -> int | None:
        """The version of the knowledge base this configuration was read from (None: not read from the state)."""
        return self._version

    def in_tenant(self, tenant: str) -> RagConfiguration:
        out = self.model_copy()
        out._tenant = tenant
        return out

    def source(self, source_id: str) -> IngestionSource | None:
        return next((s for s in self.sources if s.effective_id == source_id), None)

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


def schema_errors(data: Any, schema: dict[str, Any]) -> list[dict[str, Any]]:
    from jsonschema import Draft202012Validator  # (at the first check: off a start's path)

    validator = Draft202012Validator(schema)
    errors = []
    for err in sorted(validator.iter_errors(data), key=lambda e: (e.json_path, e.message)):
        missing = re.fullmatch(r"'(\w+)' is a required property", err.message) if err.validator == "required" else None
        if missing:  # named where it is missing: the field a form shows
            errors.append({"path": f"{err.json_path}.{missing.group(1)}", "message": err.message, "value": None})
            continue
        errors.append({"path": err.json_path, "message": err.message, "value": err.instance})
    return errors


def cron_problem(cron: str) -> str | None:
    """Why ``cron`` is no schedule EDDI or we would run, or None: five fields (EDDI refuses a Quartz seconds
    field), and a date it fires on (``0 0 30 2 *`` never does)."""
    from croniter import CroniterError, croniter

    if len(cron.split()) != 5 or not croniter.is_valid(cron):
        return f"{cron!r} is not a cron expression (5 fields: minute hour day month weekday)"
    try:
        croniter(cron, datetime(2000, 1, 1, tzinfo=timezone.utc)).get_next(datetime)
    except CroniterError:
        return f"{cron!r} never fires (no date matches it)"
    return None


def _source_errors(sources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What JSON Schema cannot say: ids unique, a cron that fires, upload limits that admit a file."""
    errors: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for i, source in enumerate(sources):
        sid = source.get("id") or slug(source["name"])
        if sid in seen:
            errors.append({"path": f"$.sources[{i}].id", "value": sid,
                           "message": f"source id {sid!r} is also the id of sources[{seen[sid]}]; give each source its own id or name"})
        seen.setdefault(sid, i)
        for key in ("cron", "schedule"):
            if source.get(key) and (problem := cron_problem(source[key])):
                errors.append({"path": f"$.sources[{i}].{key}", "value": source[key], "message": problem})
        if source.get("cron") and source.get("schedule") and source["cron"] != source["schedule"]:
            errors.append({"path": f"$.sources[{i}].schedule", "value": source["schedule"],
                           "message": "schedule is the older spelling of cron and differs from it; keep one"})
        upload = source.get("upload") or {}
        if upload.get("maxFileBytes", 0) > upload.get("maxTotalBytes", UploadSource().maxTotalBytes):
            errors.append({"path": f"$.sources[{i}].upload.maxFileBytes", "value": upload["maxFileBytes"],
                           "message": "larger than upload.maxTotalBytes, so no file could ever be stored"})
    return errors


def with_source_ids(data: dict[str, Any]) -> dict[str, Any]:
    """The configuration as it is saved: every source has its stable ``id`` (kept when given, else
    its name's slug, which a later save without ids gives again), and its cron as EDDI spells it."""
    if not isinstance(data.get("sources"), list):
        return data

    def saved(s: dict[str, Any]) -> dict[str, Any]:
        out = {**s, "id": s.get("id") or slug(s["name"])}
        if "schedule" in out:
            when = out.pop("schedule")
            out["cron"] = out.get("cron") or when
        return out

    return {**data, "sources": [saved(s) if isinstance(s, dict) and s.get("name") else s for s in data["sources"]]}


def source_blocks(schema: dict[str, Any]) -> list[str]:
    """The names of the connectors' blocks in a source (each generated from its connector: ``x-connector``)."""
    return [k for k, v in schema["properties"]["sources"]["items"]["properties"].items() if v.get("x-connector")]


def _explain(error: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A source's oneOf failure, said plainly."""
    value = error["value"]
    if error["path"].startswith("$.sources[") and "is not valid under any of the given schemas" in error["message"] \
            and isinstance(value, dict):
        blocks = source_blocks(schema)
        kinds = [k for k in blocks if k in value]
        kind = value.get("type")
        if isinstance(kind, str) and kind in blocks and kind not in value:
            return {**error, "path": f"{error['path']}.{kind}", "message": f"a source of type {kind!r} needs its block "
                    f"{kind!r} (its fields: {', '.join(schema['properties']['sources']['items']['properties'][kind].get('required', [])) or 'none required'})"}
        said = f"type {kind!r} and " if isinstance(kind, str) else ""
        return {**error, "message": f"a source has the block of its type, one of {', '.join(blocks)} (type "
                                    f"upload: none); this one has {said}{', '.join(kinds) if kinds else 'no block'}"}
    return error


def llm_task_errors(data: Any, saving: bool = False) -> list[dict[str, Any]]:
    """What an LLM configuration's tasks hold that a turn could not read (each task as LlmTaskRag reads it: a
    ``knowledgeBases`` entry without its ``name``, a wrong type), as {path, message, value} with the JSON path;
    ``saving``: also what a turn reads but can never match (an empty ``name``), refused when it is saved."""
    tasks = data.get("tasks") if isinstance(data, dict) else None
    errors: list[dict[str, Any]] = []
    for i, task in enumerate(tasks if isinstance(tasks, list) else []):
        if not isinstance(task, dict):
            errors.append({"path": f"$.tasks[{i}]", "message": "a task must be a JSON object", "value": task})
            continue
        for j, ref in enumerate(task.get("knowledgeBases") or [] if saving else []):
            if isinstance(ref, dict) and isinstance(ref.get("name"), str) and not ref["name"].strip():
                errors.append({"path": f"$.tasks[{i}].knowledgeBases[{j}].name", "value": ref["name"],
                               "message": "names no knowledge base: give the name of one in the agent's workflows"})
        try:
            LlmTaskRag.model_validate(task)
        except ValidationError as e:
            for error in e.errors():
                path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error["loc"])
                errors.append({"path": f"$.tasks[{i}]{path}", "message": error["msg"], "value": error.get("input")})
    return errors


def _audience_errors(data: dict[str, Any]) -> list[dict[str, Any]]:
    """An audience the knowledge base can keep: OWNER names its owner; DOCUMENT_ACL needs a store that filters on lists
    (EDDI's langchain4j layouts hold scalar metadata only)."""
    audience = data.get("audience", "AGENT_USERS")
    if audience == "OWNER" and not data.get("owner"):
        return [{"path": "$.owner", "value": None, "message": "audience OWNER needs an owner (user:<id>): it is set from the "
                 "verified user who saves the knowledge base; an administrator names it explicitly"}]
    eddi_table = data.get("storeType") == "pgvector" and "table" in (data.get("storeParameters") or {})
    if audience == "DOCUMENT_ACL" and ((data.get("storeNamespace") and data.get("storeType") in LANGCHAIN4J_STORES) or eddi_table):
        return [{"path": "$.audience", "value": audience, "message": "DOCUMENT_ACL needs the store to filter on each chunk's "
                 "acl list, and EDDI's langchain4j layout (storeNamespace, or pgvector's table) holds scalar metadata only; "
                 "leave storeNamespace out (the knowledge base gets a store of its own) or choose AGENT_USERS or OWNER"}]
    return []


OPEN_MAPS = ("embeddingParameters", "storeParameters", "rerankerParameters", "requiredMetadata", "ocr")  # left open, as EDDI's maps


def unknown_fields(data: Any, schema: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The fields of a RagConfiguration that the schema does not know, where EDDI's REST refuses them too (its model
    is read with unknown properties failing): the configuration itself, each source, its block and its settings; the
    parameter maps stay open. Each error names the path and the nearest known name. Checked when a configuration is
    saved, not when a stored one is read (one saved before this was refused still works)."""
    if not isinstance(data, dict):
        return []
    schema = schema or load_schema()
    errors = _unknown(data, schema, "$")
    source_schema = schema["properties"]["sources"]["items"]
    for i, source in enumerate(data.get("sources") or [] if isinstance(data.get("sources"), list) else []):
        if not isinstance(source, dict):
            continue
        errors += _unknown(source, source_schema, f"$.sources[{i}]")
        for name, body in source.items():
            spec = source_schema["properties"].get(name)
            if isinstance(body, dict) and isinstance(spec, dict) and "properties" in spec:
                errors += _unknown(body, spec, f"$.sources[{i}].{name}")
    return errors


def _unknown(data: dict[str, Any], schema: dict[str, Any], path: str) -> list[dict[str, Any]]:
    known = list(schema.get("properties") or {})
    out = []
    for name in data:
        if name in known or (path == "$" and name in OPEN_MAPS):
            continue
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.6) or \
            [k for k in known if k.lower() == str(name).lower()]
        out.append({"path": f"{path}.{name}", "value": data[name],
                    "message": f"unknown field {name!r}" + (f": did you mean {near[0]!r}?" if near else
                                                           f" (known here: {', '.join(known)})")})
    return out


def validate_rag_configuration(data: Any, schema: dict[str, Any] | None = None) -> RagConfiguration:
    """Validate raw JSON against the schema (plus cross-field rules) and build the model. ``schema``: the one with every
    connector registered (``sources.connectors.configuration_schema``); absent, the packaged file's built-in ones."""
    wrong = jsonvalues.problem(data)
    if wrong:
        path, _, message = wrong.partition(": ")
        raise ConfigValidationError([{"path": path, "message": message, "value": None}])
    schema = schema or load_schema()
    errors = [_explain(e, schema) for e in schema_errors(data, schema)]
    if not errors:
        errors += _source_errors(data.get("sources") or [])
        if data.get("storeNamespace") and data.get("storeType", "in-memory") in NAMESPACE_REFUSED:
            errors.append({"path": "$.storeNamespace", "value": data["storeNamespace"],
                           "message": f"adopting an EDDI store in place works on {', '.join(LANGCHAIN4J_STORES)} so far, "
                                      f"not on storeType {data.get('storeType', 'in-memory')!r}; leave storeNamespace out "
                                      "(the knowledge base then gets a store of its own, and its documents are ingested again)"})
        errors += _audience_errors(data)
        if data.get("storeNamespace") and data.get("storeType") in NO_TEXT_INDEX_IN_EDDI_LAYOUT and \
                data.get("searchMode", "vector") != "vector":
            errors.append({"path": "$.searchMode", "value": data["searchMode"],
                           "message": f"EDDI's {data['storeType']} collection (storeNamespace) has no text index to search "
                                      "by keywords: use searchMode 'vector' (EDDI's), or leave storeNamespace out"})
        for field in ("embeddingParameters", "rerankerParameters"):  # (EDDI's Vertex endpoint among them; a store's at use)
            errors += static_endpoint_errors(data.get(field) or {}, f"$.{field}")
        size, overlap = data.get("chunkSize", 512), data.get("chunkOverlap", 64)
        if overlap >= size:
            errors.append({
                "path": "$.chunkOverlap",
                "message": f"chunkOverlap ({overlap}) must be smaller than chunkSize ({size})",
                "value": overlap,
            })
    if errors:
        raise ConfigValidationError(errors)
    return RagConfiguration.model_validate(data)


# --- the RAG fields of an LLM task -------------------------------------------------------


class KnowledgeBaseRef(BaseModel):
    """An explicit reference from an LLM task to a knowledge base, by name."""

    model_config = ConfigDict(extra="ignore")

    name: str
    maxResults: int | None = Field(default=None, ge=1)
    minScore: float | None = Field(default=None, ge=0, le=1)


class RagDefaults(BaseModel):
    """Overrides applied to every auto-discovered knowledge base; an absent field keeps the KB's value."""

    model_config = ConfigDict(extra="ignore")

    maxResults: int | None = Field(default=None, ge=1)
    minScore: float | None = Field(default=None, ge=0, le=1)


NO_RELEVANT_CONTEXT = ("No passage in the knowledge bases is relevant to this question. Tell the user that "
                       "you found nothing about it in the knowledge bases; do not make up an answer from them.")


# The TypeSense integration spec's anti-hallucination instructions (its French lines in English),
# with the citation rule the context's labels make possible.
GROUNDING_INSTRUCTIONS = (
    "Answer ONLY from the sources above. If the information is not in the sources, say clearly that you did "
    "not find it. NEVER make up information. Cite each fact with its source label exactly as given, e.g. [Source 1].")

# Answers that say nothing relevant was found (English, and the French of the TypeSense spec).
MISS_PHRASES = (
    "found nothing", "nothing relevant", "no relevant", "no information", "not find", "couldn't find",
    "don't have information", "do not have information", "not in the sources", "not mentioned in the",
    "pas trouvé", "aucune information", "pas de données",
)


class LlmTaskRag(BaseModel):
    """RAG-related fields of an EDDI LLM task (``tasks[]`` of an llm configuration)."""

    model_config = ConfigDict(extra="ignore")

    id: str | None = None
    knowledgeBases: list[KnowledgeBaseRef] | None = None
    enableWorkflowRag: bool = False
    ragDefaults: RagDefaults | None = None
    httpCallRag: str | None = None
    maxRagContextChars: int | None = 20000
    # The whole system prompt after RAG, cut at this many characters (EDDI's; -1, 0 or None: no cap).
    maxSystemPromptChars: int | None = None
    # none | neighbors | section; None: each knowledge base's own contextExpansion ("none": EDDI's)
    contextExpansion: Literal["none", "neighbors", "section"] | None = None
    # What a follow-up searches with: the conversation's accumulated topic, or (EDDI's) the message alone
    queryStrategy: Literal["contextualised", "raw"] = "contextualised"
    # score: the best max(maxResults) hits of all KBs by score; workflow (EDDI's): each KB's hits in workflow order
    contextMerge: Literal["score", "workflow"] = "score"
    # [Source n: document, section] before each passage, for citations (false: EDDI's bare chunk text)
    sourceLabels: bool = True
    # Put under "## Relevant Context:" when the knowledge bases answered but no passage passed;
    # empty: say nothing.
    noRelevantContextMessage: str = NO_RELEVANT_CONTEXT
    # The model's temperature on turns where context was injected (the TypeSense spec: 0.1); None:
    # the model's own.
    ragTemperature: float | None = Field(default=None, ge=0, le=2)
    # Put after the context on turns where it was injected: true = GROUNDING_INSTRUCTIONS, a string
    # = that text, false or "" = nothing.
    groundingInstructions: bool | str = False
    # Retrieved text framed as quoted data, between marks a document cannot forge, so it cannot speak as the system
    # message (ours); "none": as it is (EDDI's)
    contextFraming: Literal["quoted", "none"] = "quoted"
    # An answer containing one of these (case-insensitive) is a RAG miss; None: MISS_PHRASES.
    missPhrases: list[str] | None = None

    def framed(self, body: str, what: str) -> str:
        """Retrieved text as the model is shown it: quoted (``contextFraming``, ours) or as it is (EDDI's)."""
        return body if self.contextFraming == "none" else quoted(body, what)

    def grounding(self) -> str:
        if self.groundingInstructions is True:
            return GROUNDING_INSTRUCTIONS
        return self.groundingInstructions or ""
