"""Import an EDDI agent export: the zip EDDI's ``POST /backup/export/{agentId}`` writes.

Its layout (labsai/EDDI ``RestExportService``): ``<agentId>.agent.json`` (+ ``.descriptor.json``) at the
root; per workflow ``<workflowId>/<version>/<workflowId>.workflow.json`` (``.package.json`` before v6),
and beside it each configuration a step names, ``<id>.<ext>.json``: ``rag``, ``httpcalls``,
``langchain`` (LLM), and kinds eddi-rag does not model (``behavior``, ``regulardictionary``, ``output``,
``property``, ``mcpcalls``; ``snippets/`` and ``schedules/`` beside the agent).

The agent, its workflows and their RAG, LLM and httpCall configurations are created here (an id the
export used is kept when it is free; the descriptor's name and description too), every reference rewritten
to the new resources; legacy (v5) and current EDDI URIs are both read. Every other file is kept byte for byte
with its workflow (or, beside the agent, with the agent) and ``eddi_export`` writes it back where it was.
Everything is checked before anything is written, and a failure while writing removes what this import wrote:
an export is imported whole or not at all. The report lists what was kept, what was skipped and why, what is
imported but unused (an embedding parameter the provider does not take), and every secret the export scrubbed
(``${vault:REDACTED}``), which must be set before the resource can be used.
"""

from __future__ import annotations

import io
import json
import posixpath
import re
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from eddi_rag.common import jsonvalues
from eddi_rag.common.secrets import REDACTED, redacted_paths
from eddi_rag.config import ConfigValidationError, validate_rag_configuration
from eddi_rag.errors import EddiRagError
from eddi_rag.resource_types import ResourceRef, parse_uri, resource_uri
from eddi_rag.resources import ResourceStore
from eddi_rag.sources.connectors import configuration_schema
from eddi_rag.stores.ownership import location_errors
from eddi_rag.verbs.eddi_export import NOTES
from eddi_rag.verbs.knowledge_bases import KnowledgeBases
from eddi_rag.verbs.saving import own_store
from eddi_rag.workflow.traversal import workflow_steps

# An export holds small JSON files: what it may unpack to is checked from the zip's directory before
# anything is inflated (Python's zipfile never inflates past a declared size).
MAX_ENTRIES = 10_000
MAX_ENTRY_BYTES = 16 * 1024 * 1024  # one file, uncompressed
MAX_BYTES = 64 * 1024 * 1024  # all files, uncompressed
MAX_DESCRIPTION = 10_000  # characters of a descriptor's name or description (listed with every descriptor)
# A step's configuration kind -> the file extension EDDI's export gives it.
EXTENSIONS = {"rags": ("rag",), "httpcalls": ("httpcalls", "apicalls"), "llm": ("langchain", "llm")}
NOT_READ = {"behavior": "behavior rules", "regulardictionary": "dictionary", "dictionary": "dictionary", "output": "output set",
            "property": "property setter", "mcpcalls": "MCP calls", "parser": "parser", "snippet": "prompt snippet",
            "schedule": "schedule"}
_CONFIG_FILE = re.compile(r"^(?P<id>.+)\.(?P<ext>[a-z]+)\.json$")


class ExportError(EddiRagError, ValueError):
    """The file is not an EDDI agent export we can import; the message says what is wrong."""
    status = 400


@dataclass
class ImportReport:
    agents: list[ResourceRef] = field(default_factory=list)
    created: list[ResourceRef] = field(default_factory=list)  # every resource written, in order
    skipped: list[str] = field(default_factory=list)
    redacted: list[str] = field(default_factory=list)  # "<uri>: <path>" of each ${vault:REDACTED} imported
    kept: list[str] = field(default_factory=list)  # each file not modelled here, kept byte for byte
    warnings: list[str] = field(default_factory=list)  # what is imported but not used (an unknown embedding parameter)

    def to_json(self) -> dict[str, Any]:
        return {"agents": [r.uri for r in self.agents], "created": [r.uri for r in self.created], "skipped": self.skipped,
                "redacted": self.redacted, "kept": self.kept, "warnings": self.warnings}


@dataclass
class _Planned:
    kind: str
    id: str
    data: dict[str, Any]
    name: str
    description: str
    kept: dict[str, bytes]


def _what(name: str) -> str:
    """What a kept file is, by its extension (``<id>.behavior.json``: behavior rules)."""
    m = _CONFIG_FILE.match(PurePosixPath(name).name)
    return NOT_READ.get(m.group("ext"), m.group("ext")) if m else "a file"


class _Export:
    """The zip's JSON files by path (paths normalised; the zip checked for size and traversal)."""

    def __init__(self, data: bytes):
        try:
            archive = zipfile.ZipFile(io.BytesIO(data))
        except zipfile.BadZipFile as e:
            raise ExportError(f"not a zip file ({e})") from None
        members = [m for m in archive.infolist() if not m.is_dir()]
        if len(members) > MAX_ENTRIES:
            raise ExportError(f"the zip has {len(members)} files; an agent export has far fewer (at most {MAX_ENTRIES})")
        big = max(members, key=lambda m: m.file_size, default=None)
        if big is not None and big.file_size > MAX_ENTRY_BYTES:
            raise ExportError(f"{big.filename[:100]!r} unpacks to {big.file_size / 2**20:,.1f} MB; a file of an agent export "
                              f"may unpack to at most {MAX_ENTRY_BYTES // 2**20} MB")
        if sum(m.file_size for m in members) > MAX_BYTES:
            raise ExportError(f"the zip unpacks to more than {MAX_BYTES // 2**20} MB (the most an agent export may)")
        self.files: dict[str, bytes] = {}
        for m in members:
            path = posixpath.normpath(m.filename.replace("\\", "/")).lstrip("/")
            if path.startswith("..") or not path.endswith(".json"):
                continue
            self.files[path] = archive.read(m)
        agents = sorted((p for p in self.files if p.endswith(".agent.json") or p.endswith(".bot.json")),
                        key=lambda p: (p.count("/"), p))
        if not agents:
            raise ExportError("not an EDDI agent export: no <agentId>.agent.json in the zip")
        top = PurePosixPath(agents[0]).parent
        self.root = "" if str(top) == "." else f"{top}/"
        self.agent_paths = [p for p in agents if PurePosixPath(p).parent == top]

    def json(self, path: str) -> dict[str, Any]:
        try:
            value = json.loads(normalise(self.files[path].decode("utf-8")))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ExportError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(value, dict):
            raise ExportError(f"{path}: a configuration must be a JSON object")
        if wrong := jsonvalues.problem(value, path):  # no NaN, surrogates or control characters are stored
            raise ExportError(wrong)
        return value

    def find(self, folder: str, id: str, extensions: tuple[str, ...]) -> str | None:
        for ext in extensions:
            path = f"{folder}{id}.{ext}.json"
            if path in self.files:
                return path
        return None


# EDDI's v5 URIs, as its own import rewrites them (AbstractBackupService.LEGACY_URI_REWRITES); parse_uri
# reads the current ones (and ${vault:…} resolves as ${eddivault:…}).
_REWRITES = (
    ("eddi://ai.labs.package/packagestore/packages/", "eddi://ai.labs.workflow/workflowstore/workflows/"),
    ("eddi://ai.labs.bot/botstore/bots/", "eddi://ai.labs.agent/agentstore/agents/"),
    ("eddi://ai.labs.langchain/langchainstore/langchains/", "eddi://ai.labs.llm/llmstore/llms/"),
)


def normalise(text: str) -> str:
    for old, new in _REWRITES:
        text = text.replace(old, new)
    return text


def _ref(uri: Any) -> ResourceRef | None:
    try:
        return parse_uri(uri)
    except ValueError:
        return None


def _descriptor(export: _Export, path: str) -> tuple[str, str]:
    """(name, description) of the descriptor at ``path`` ("" for what it lacks, or when it is no JSON object)."""
    try:
        meta = json.loads(export.files[path]) if path in export.files else {}
    except ValueError:  # not JSON, or not UTF-8: nothing to name it by
        meta = {}
    if not isinstance(meta, dict):
        return "", ""
    name, description = (str(meta.get(k) or "") for k in ("name", "description"))
    for what, text in (("name", name), ("description", description)):
        if wrong := jsonvalues.text_problem(text, f"{path}: the {what}"):
            raise ExportError(wrong)
        if len(text) > MAX_DESCRIPTION:
            raise ExportError(f"{path}: the {what} has {len(text):,} characters (at most {MAX_DESCRIPTION:,})")
    return name, description


def _left_out(export: _Export) -> dict[str, dict[str, Any]]:
    """What an export of ours left out of a RagConfiguration or wrote as EDDI's nearest value ({sources, replaced}),
    by the file's path: put back on import (``eddi_export.NOTES``)."""
    raw = export.files.get(f"{export.root}{NOTES}")
    try:
        notes = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    entries = notes.get("leftOut") if isinstance(notes, dict) else None
    return {f"{export.root}{e['file']}": {"sources": e.get("sources") if isinstance(e.get("sources"), list) else [],
                                           "replaced": e.get("replaced") if isinstance(e.get("replaced"), dict) else {}}
            for e in entries or [] if isinstance(e, dict) and isinstance(e.get("file"), str)}


def _location_errors(body: dict[str, Any]) -> list[dict[str, Any]]:
    """EDDI's rules for the table, collection or index a knowledge base names (stores.ownership), which its import
    applies as its create does: a ``${…}`` reference or a name in its reserved namespace refuses the file."""
    params = body.get("storeParameters")
    return location_errors(str(body.get("storeType", "in-memory")), params) if isinstance(params, dict) else []


def import_agent_export(resources: ResourceStore, data: bytes, tenant: str = "default",
                        checked: Callable[..., dict[str, Any]] | None = None) -> ImportReport:
    """Import every agent of an EDDI export (see the module doc). With ``checked`` (the save rules,
    ``KnowledgeBases.checked``), every configuration passes them, but for the reference check (the import
    rewrites references to what it creates); without it, RagConfigurations pass their JSON Schema."""
    export = _Export(data)
    report = ImportReport()
    planned: list[_Planned] = []  # written in order
    new_ids: dict[tuple[str, str, int], str] = {}
    taken: set[tuple[str, str]] = set()
    left_out = _left_out(export)
    consumed = {f"{export.root}{NOTES}"}  # paths read as what we model; every other file is kept as it is

    def plan(kind: str, old_id: str, version: int, data: dict[str, Any], folder: str,
             kept: dict[str, bytes] | None = None) -> str:
        key = (kind, old_id, version)
        if key not in new_ids:
            id = old_id if not resources.exists(kind, old_id) and (kind, old_id) not in taken else f"{old_id}-{len(planned) + 1}"
            while resources.exists(kind, id) or (kind, id) in taken:
                id += "x"
            taken.add((kind, id))
            new_ids[key] = id
            consumed.add(f"{folder}{old_id}.descriptor.json")
            name, description = _descriptor(export, f"{folder}{old_id}.descriptor.json")
            planned.append(_Planned(kind, id, data, name, description, kept or {}))
        return resource_uri(kind, new_ids[key], 1)

    folders = []
    for agent_path in export.agent_paths:
        agent_id = PurePosixPath(agent_path).name.rsplit(".", 2)[0]
        agent = export.json(agent_path)
        consumed.add(agent_path)  # (its descriptor: plan reads it)
        workflows = []
        for uri in agent.get("workflows") or agent.get("packages") or []:
            ref = _ref(uri)
            if ref is None or ref.kind != "workflows":
                report.skipped.append(f"agent {agent_id}: {uri!r} is not a workflow URI")
                continue
            folder = f"{export.root}{ref.id}/{ref.version}/"
            path = export.find(folder, ref.id, ("workflow", "package"))
            if path is None:
                raise ExportError(f"agent {agent_id} names workflow {ref.id} version {ref.version}, which the zip lacks "
                                  f"({folder}{ref.id}.workflow.json)")
            workflow = export.json(path)
            consumed.update((path, f"{folder}{ref.id}.descriptor.json"))  # (plan reads the descriptor)
            folders.append(folder)
            for i, step in enumerate(workflow_steps(workflow)):
                config = step.get("config") if isinstance(step.get("config"), dict) else None
                target = _ref(config.get("uri")) if config else None
                if config is None or target is None or target.kind not in EXTENSIONS:
                    continue  # a step of a kind we do not model: its file is kept below
                file = export.find(folder, target.id, EXTENSIONS[target.kind])
                if file is None:
                    raise ExportError(f"workflow {ref.id} step {i} names {config['uri']}, whose file the zip lacks")
                consumed.add(file)
                body = export.json(file)
                if target.kind == "rags":
                    if file in left_out:  # what our export left out or wrote as EDDI's nearest, for EDDI's sake
                        kept = left_out[file]
                        body = {**body, **kept["replaced"]}
                        if kept["sources"]:
                            body["sources"] = [*(body.get("sources") or []), *kept["sources"]]
                        body = {k: v for k, v in body.items() if v is not None}
                    body = own_store(body)  # a store of its own, as EDDI stamps "id" on import
                try:
                    if target.kind == "rags" and (wrong := _location_errors(body)):
                        raise ConfigValidationError(wrong)  # an import creates: EDDI's guard rules its location too
                    if checked is not None:
                        body = checked(target.kind, body, tenant, references=False)
                    elif target.kind == "rags":
                        validate_rag_configuration(body, configuration_schema())
                except ConfigValidationError as e:
                    raise ExportError(f"{file}: {e}") from None
                if target.kind == "rags":
                    report.warnings += [f"{file}: {w['path']}: {w['message']}" for w in KnowledgeBases.warnings(body)]
                config["uri"] = plan(target.kind, target.id, target.version, body, folder)
            kept = {p[len(folder):]: export.files[p] for p in export.files
                    if p.startswith(folder) and "/" not in p[len(folder):] and p not in consumed}
            report.kept += [f"workflow {ref.id}: {name} ({_what(name)}) kept as it is and exported back unchanged"
                            for name in kept if not name.endswith(".descriptor.json")]
            workflows.append(plan("workflows", ref.id, ref.version, workflow, folder, kept))
        agent["workflows"] = workflows
        agent.pop("packages", None)
        plan("agents", agent_id, 0, agent, export.root)
    # snippets, schedules and whatever else lies beside the agents come with the first agent
    kept = {p[len(export.root):]: body for p, body in export.files.items()
            if p.startswith(export.root) and p not in consumed and not any(p.startswith(f) for f in folders)}
    report.kept += [f"{name} ({_what(name)}) kept as it is and exported back unchanged"
                    for name in kept if not name.endswith(".descriptor.json")]
    next(p for p in planned if p.kind == "agents").kept.update(kept)

    try:
        for p in planned:
            ref = resources.create(p.kind, p.data, description=p.description, id=p.id, tenant=tenant, name=p.name,
                                   kept=p.kept)
            report.created.append(ref)
            report.redacted += [f"{ref.uri}: {path} is {REDACTED} (the export scrubbed a secret: set it before use)"
                                for path in redacted_paths(p.data)]
            if p.kind == "agents":
                report.agents.append(ref)
    except Exception:
        for ref in reversed(report.created):  # all or nothing
            try:
                resources.delete(ref.kind, ref.id, permanent=True)
            except Exception:  # noqa: BLE001, S110 - best effort: the original error is what matters
                pass
        raise
    return report
