"""Import an EDDI agent export: the zip EDDI's ``POST /backup/export/{agentId}`` writes.

Its layout (labsai/EDDI ``RestExportService``): ``<agentId>.agent.json`` (+ ``.descriptor.json``) at the
root; per workflow ``<workflowId>/<version>/<workflowId>.workflow.json`` (``.package.json`` before v6),
and beside it each configuration a step names, ``<id>.<ext>.json``: ``rag``, ``httpcalls``,
``langchain`` (LLM), and kinds eddi-rag does not read (``behavior``, ``regulardictionary``, ``output``,
``property``, ``mcpcalls``; snippets and schedules at the root).

The agent, its workflows and their RAG, LLM and httpCall configurations are created here (an id the
export used is kept when it is free), every reference rewritten to the new resources; legacy (v5) and
current EDDI URIs are both read. Everything is checked before anything is written, and a failure while
writing removes what this import wrote: an export is imported whole or not at all. The report says
what was skipped and why, and names every secret the export scrubbed (``${vault:REDACTED}``), which must be
set before the resource can be used.
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

from eddi_rag import jsonvalues
from eddi_rag.config import ConfigValidationError, validate_rag_configuration
from eddi_rag.errors import EddiRagError
from eddi_rag.resources import ResourceRef, ResourceStore, parse_uri, resource_uri
from eddi_rag.secrets import REDACTED, redacted_paths
from eddi_rag.verbs.saving import own_store
from eddi_rag.workflow.traversal import workflow_steps

# An export holds small JSON files: what it may unpack to is checked from the zip's directory before
# anything is inflated (Python's zipfile never inflates past a declared size).
MAX_ENTRIES = 10_000
MAX_ENTRY_BYTES = 16 * 1024 * 1024  # one file, uncompressed
MAX_BYTES = 64 * 1024 * 1024  # all files, uncompressed
MAX_DESCRIPTION = 10_000  # characters of a descriptor's description (it is listed with every descriptor)
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

    def to_json(self) -> dict[str, Any]:
        return {"agents": [r.uri for r in self.agents], "created": [r.uri for r in self.created], "skipped": self.skipped,
                "redacted": self.redacted}


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


def import_agent_export(resources: ResourceStore, data: bytes, tenant: str = "default",
                        checked: Callable[..., dict[str, Any]] | None = None) -> ImportReport:
    """Import every agent of an EDDI export (see the module doc). With ``checked`` (the save rules,
    ``Configs.checked``), every configuration passes them, but for the reference check (the import
    rewrites references to what it creates); without it, RagConfigurations pass their JSON Schema."""
    export = _Export(data)
    report = ImportReport()
    planned: list[tuple[str, str, dict[str, Any], str]] = []  # (kind, old id, data, description), written in order
    new_ids: dict[tuple[str, str, int], str] = {}
    taken: set[tuple[str, str]] = set()

    def plan(kind: str, old_id: str, version: int, data: dict[str, Any], folder: str) -> str:
        key = (kind, old_id, version)
        if key not in new_ids:
            id = old_id if not resources.exists(kind, old_id) and (kind, old_id) not in taken else f"{old_id}-{len(planned) + 1}"
            while resources.exists(kind, id) or (kind, id) in taken:
                id += "x"
            taken.add((kind, id))
            new_ids[key] = id
            descriptor = export.files.get(f"{folder}{old_id}.descriptor.json")
            description = ""
            if descriptor:
                try:
                    meta = json.loads(descriptor)
                    description = str(meta.get("description") or meta.get("name") or "") if isinstance(meta, dict) else ""
                except ValueError:  # not JSON, or not UTF-8: no description
                    pass
                if wrong := jsonvalues.text_problem(description, f"{folder}{old_id}.descriptor.json: the description"):
                    raise ExportError(wrong)
                if len(description) > MAX_DESCRIPTION:
                    raise ExportError(f"{folder}{old_id}.descriptor.json: the description has {len(description):,} characters "
                                      f"(at most {MAX_DESCRIPTION:,})")
            planned.append((kind, id, data, description))
        return resource_uri(kind, new_ids[key], 1)

    for agent_path in export.agent_paths:
        agent_id = PurePosixPath(agent_path).name.rsplit(".", 2)[0]
        agent = export.json(agent_path)
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
            for i, step in enumerate(workflow_steps(workflow)):
                config = step.get("config") if isinstance(step.get("config"), dict) else None
                target = _ref(config.get("uri")) if config else None
                if config is None or target is None or target.kind not in EXTENSIONS:
                    if config and config.get("uri"):
                        what = NOT_READ.get(str(step.get("type", "")).rsplit(".", 1)[-1], str(step.get("type")))
                        report.skipped.append(f"workflow {ref.id} step {i} ({what}): not imported, eddi-rag does not read it; "
                                              f"the step keeps its URI {config['uri']}")
                    continue
                file = export.find(folder, target.id, EXTENSIONS[target.kind])
                if file is None:
                    raise ExportError(f"workflow {ref.id} step {i} names {config['uri']}, whose file the zip lacks")
                body = export.json(file)
                if target.kind == "rags" and isinstance(body, dict):
                    body = own_store(body)  # a store of its own, as EDDI stamps "id" on import
                try:
                    if checked is not None:
                        body = checked(target.kind, body, tenant, references=False)
                    elif target.kind == "rags":
                        validate_rag_configuration(body)
                except ConfigValidationError as e:
                    raise ExportError(f"{file}: {e}") from None
                config["uri"] = plan(target.kind, target.id, target.version, body, folder)
            workflows.append(plan("workflows", ref.id, ref.version, workflow, folder))
        agent["workflows"] = workflows
        agent.pop("packages", None)
        plan("agents", agent_id, 0, agent, export.root)
    for path in export.files:
        m = _CONFIG_FILE.match(PurePosixPath(path).name)
        if m and m.group("ext") in ("snippet", "schedule"):
            report.skipped.append(f"{NOT_READ[m.group('ext')]} {m.group('id')}: not imported, eddi-rag does not read it")

    try:
        for kind, id, body, description in planned:
            ref = resources.create(kind, body, description=description, id=id, tenant=tenant)
            report.created.append(ref)
            report.redacted += [f"{ref.uri}: {path} is {REDACTED} (the export scrubbed a secret: set it before use)"
                                for path in redacted_paths(body)]
            if kind == "agents":
                report.agents.append(ref)
    except Exception:
        for ref in reversed(report.created):  # all or nothing
            try:
                resources.delete(ref.kind, ref.id, permanent=True)
            except Exception:  # noqa: BLE001, S110 - best effort: the original error is what matters
                pass
        raise
    return report
