"""Every kind of source, by its ``type``: one module of this package each (naming its connector ``CONNECTOR``), and
those another package registers under the entry point group ``eddi_rag.connectors`` (a connector, or its class). This
registry is the only list of them: a source's JSON Schema (its blocks, its ``type``), the docs' field table and the
Manager's source card are generated from what each connector declares (``configuration``, ``needs``)."""

from __future__ import annotations

import copy
import importlib
import logging
import pkgutil
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from eddi_rag.config import load_schema, source_blocks
from eddi_rag.errors import EddiRagError
from eddi_rag.sources.base import SourceConnector

GROUP = "eddi_rag.connectors"
FIRST = ("web", "upload")  # EDDI's two, in EDDI's order; the others by name
log = logging.getLogger(__name__)


class UnknownSourceTypeError(EddiRagError, ValueError):
    status = 400


@cache
def connectors() -> dict[str, SourceConnector]:
    """Every connector: this package's, then those registered by entry point (one may not replace a built-in)."""
    found: dict[str, SourceConnector] = {}
    for module in pkgutil.iter_modules(__path__):
        built_in = getattr(importlib.import_module(f"{__name__}.{module.name}"), "CONNECTOR", None)
        if built_in is not None:
            found[built_in.type] = built_in
    for point in entry_points(group=GROUP):
        try:
            loaded = point.load()
            registered = loaded() if isinstance(loaded, type) else loaded
            kind = registered.type
        except Exception as e:  # noqa: BLE001 - a broken plug-in is named in the log, the built-ins still serve
            log.error("source connector %s (entry point %s) not loaded: %s", point.value, point.name, e)
            continue
        if kind in found:
            log.error("source connector %s (entry point %s) not loaded: type %r is taken", point.value, point.name, kind)
            continue
        found[kind] = registered
    return {k: found[k] for k in sorted(found, key=lambda k: (k not in FIRST, FIRST.index(k) if k in FIRST else 0, k))}


def connector(kind: str) -> SourceConnector:
    found = connectors().get(kind)
    if found is None:
        raise UnknownSourceTypeError(f"sources[].type: {kind!r} is not one of {', '.join(connectors())}")
    return found


def reload() -> None:
    """Look for connectors again (a package installed or registered since)."""
    connectors.cache_clear()
    configuration_schema.cache_clear()


def block_schema(connector: SourceConnector) -> dict[str, Any]:
    """A connector's block as JSON Schema: its configuration's, plain (no titles, ``type: [x, "null"]`` for an optional
    value), marked as a connector's (``x-connector``), with what it needs."""
    model = connector.configuration
    assert model is not None
    schema = model.model_json_schema()
    for name, field in model.model_fields.items():  # a default made by a factory is a default too
        if not field.is_required() and "default" not in schema["properties"][name]:
            schema["properties"][name]["default"] = field.get_default(call_default_factory=True)
    schema.update({"x-connector": connector.type, "x-needs": connector.needs})
    return _plain(schema)


def _plain(node: Any) -> Any:
    if isinstance(node, list):
        return [_plain(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: _plain(v) for k, v in node.items() if k != "title"}
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        other = next(o for o in options if o != {"type": "null"})
        del out["anyOf"]
        out = {**other, **out, "type": [other.get("type", "string"), "null"]}
    if isinstance(out.get("description"), str):
        out["description"] = " ".join(out["description"].split())
    return {k: out[k] for k in sorted(out, key=lambda k: (ORDER.index(k) if k in ORDER else len(ORDER), k if k.startswith("x-") else ""))}


ORDER = ("type", "required", "description", "properties", "items", "default")  # then the bounds, as written, then x-…


def block_fields(kind: str) -> dict[str, dict[str, Any]]:
    """The JSON Schema of each field of ``kind``'s block, with its markers (``writeOnly``, ``x-outbound``,
    ``x-on-server``); {} for a type without a block."""
    return (configuration_schema()["properties"]["sources"]["items"]["properties"].get(kind) or {}).get("properties") or {}


def secret_fields(kind: str) -> tuple[str, ...]:
    """The fields of ``kind``'s block its connector marks ``secret()``."""
    return tuple(name for name, field in block_fields(kind).items() if field.get("writeOnly"))


@cache
def configuration_schema() -> dict[str, Any]:
    """The RagConfiguration's JSON Schema with every connector registered: the packaged file (whose blocks are the
    built-in connectors', written by ``eddi-rag reference``) with its source blocks, ``type`` and ``oneOf`` made from
    the registry. With no connector registered by another package, that is the packaged file as it is (``test_docs``
    keeps it so): no connector is imported to read a configuration."""
    return load_schema() if not entry_points(group=GROUP) else built_schema()


def built_schema() -> dict[str, Any]:
    """The packaged schema with its source blocks, ``type`` and ``oneOf`` made from the connectors registered now (what
    ``eddi-rag reference`` writes, and what a server with a connector of another package serves)."""
    schema = copy.deepcopy(load_schema())
    item = schema["properties"]["sources"]["items"]
    for old in source_blocks(schema):
        del item["properties"][old]
    found = connectors()
    blocks = {kind: block_schema(c) for kind, c in found.items() if c.configuration is not None}
    properties = dict(item["properties"])
    at = list(properties).index("upload")  # the blocks before upload and settings, as EDDI's model lists them
    item["properties"] = {**dict(list(properties.items())[:at]), **blocks, **dict(list(properties.items())[at:])}
    item["properties"]["type"]["enum"] = list(found)
    item["properties"]["type"]["description"] = (
        f"What the documents come from; absent: the block present ({', '.join(blocks)}), else web (EDDI's default).")
    item["properties"]["type"]["x-needs"] = {kind: c.needs for kind, c in found.items()}

    def others(kind: str | None) -> dict[str, Any]:
        return {"anyOf": [{"required": [b]} for b in blocks if b != kind]}

    item["oneOf"] = [{"required": [kind] if kind in blocks else ["type"], "properties": {"type": {"const": kind}},
                      "not": others(kind)} for kind in found]
    return schema
