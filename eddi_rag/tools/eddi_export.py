"""Export an agent the way EDDI's ``POST /backup/export/{agentId}`` does, so EDDI (or we) can import it.

The zip's layout (labsai/EDDI ``RestExportService``, read by ``eddi_import``): ``<agentId>.agent.json`` and
``<agentId>.descriptor.json`` at the root; per workflow ``<workflowId>/<version>/<workflowId>.workflow.json``
(+ descriptor) and beside it each configuration a step names that we model, ``<id>.rag.json``,
``<id>.httpcalls.json``, ``<id>.langchain.json`` (+ descriptors). URIs are written in EDDI's form. Literal
secrets become ``${vault:REDACTED}`` as EDDI's ``SecretScrubber`` decides: a field named like a credential
(``apiKey``, ``password``, ``…Token`` but ``maxTokens`` …; in a header map also ``…Key``), a URL's user
information and credential query parameters, and key-like strings of high entropy outside structural and
descriptive fields (a model, table or collection name is never redacted, where EDDI's scrubber would);
references (``${vault:…}``, ``${eddivault:…}``, ``${env:…}``, ``${vars:…}``) stay. Vectors, uploaded files and
ingestion state are not exported (EDDI's do not carry them either)."""

from __future__ import annotations

import io
import json
import math
import re
import zipfile
from collections import Counter
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from eddi_rag.resources import ResourceStore, parse_uri, resource_uri
from eddi_rag.resources.base import Descriptor
from eddi_rag.secrets import REDACTED
from eddi_rag.workflow.traversal import workflow_steps

FILE_EXTENSIONS = {"rags": "rag", "httpcalls": "httpcalls", "llm": "langchain"}  # as EDDI's export names them
_SECRET_NAMES = {"apikey", "apitoken", "password", "passwd", "secret", "secretkey", "token", "accesstoken",
                 "authorization", "auth", "credential", "credentials", "privatekey", "clientsecret"}
_SECRET_SUFFIXES = ("token", "secret", "password", "passwd", "credential", "credentials", "authorization")
_QUANTITIES = ("max", "min", "num", "number", "total", "budget")  # maxTokens counts tokens, it is none
_STRUCTURAL = {"type", "subtype", "name", "action", "actions", "expressions", "fromobjectpath", "toobjectpath",
               "behaviorrulename", "scope", "uri", "occurrence",
               # what names a model, a place or a choice is never a credential, however random it looks
               # (EDDI's scrubber redacts text-embedding-3-large: an improvement on it, README: EDDI exports)
               "model", "modelname", "modelid", "deploymentname", "collectionname", "tablename", "table", "indexname",
               "textindexname", "databasename", "database", "storenamespace", "storetype", "embeddingprovider",
               "embeddingproviderid", "chunkstrategy", "reranker", "description", "id", "region", "tasktype"}
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


def _scrub_text(name: str | None, parent: str | None, text: str) -> str:
    if _REFERENCE.search(text):
        return text
    if secret_field(name, parent):
        return REDACTED
    if text.strip().lower().startswith(("http://", "https://")):
        return _scrub_url(text)
    if (name is None or _norm(name) not in _STRUCTURAL) and _KEY_LIKE.fullmatch(text) and _entropy(text) > 3.5:
        return REDACTED
    return text


def scrub(value: Any, name: str | None = None, parent: str | None = None) -> Any:
    """``value`` with its literal secrets replaced by ``${vault:REDACTED}`` (EDDI's rules, see the module doc)."""
    if isinstance(value, dict):
        return {k: _scrub_text(k, name, v) if isinstance(v, str) else scrub(v, k, name) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_text(name, None, v) if isinstance(v, str) else scrub(v, name, parent) for v in value]
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


def export_agent(resources: ResourceStore, agent_id: str, tenant: str | None = None) -> bytes:
    """The zip of agent ``agent_id`` (its current version), its workflows and the RAG, LLM and httpCall
    configurations their steps name, in EDDI's layout (see the module doc)."""
    files: dict[str, Any] = {}

    def add(path: str, kind: str, id: str, version: int) -> dict[str, Any]:
        data = resources.read(kind, id, version, tenant=tenant)
        files[path] = scrub(canonical_uris(data))
        files[path.rsplit(".", 2)[0] + ".descriptor.json"] = _descriptor(resources.descriptor(kind, id, tenant),
                                                                         resource_uri(kind, id, version))
        return data

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
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, body in files.items():
            archive.writestr(path, json.dumps(body, indent=2, ensure_ascii=False))
    return out.getvalue()
