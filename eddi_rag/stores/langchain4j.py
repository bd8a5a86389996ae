"""EDDI's stores as langchain4j lays them out, so a knowledge base can adopt one in place (``storeNamespace``).

EDDI names a knowledge base's store after it (labsai/EDDI ``configs/rag/model/KnowledgeBaseStorage.java``):
``storeNamespace: "name"`` (6.5.0, and EDDI's reading of no value) ``eddi_kb_<name, lower-cased, [^a-z0-9_] →
_>`` (pgvector: cut at 63 characters), chunks tagged ``kbId=<name>``, retrieval unfiltered; ``"id"``
``eddi_kbid_<id>`` the same way, chunks tagged ``kbId=<id>`` and retrieval filtered on it (the table may be
shared). An explicit ``table`` (pgvector) or ``collectionName`` names the place in both. MongoDB Atlas as EDDI has
it: the name layout's collection is ``eddi_kb_<name>`` as written (EDDI sanitises no Atlas name), and retrieval in the
``"id"`` layout is filtered on ``kbId`` only when ``collectionName`` is named (``filtersRetrieval``: Atlas refuses a
filter on a field its index does not declare, and a KB's own default collection has nobody to be kept apart from).
A knowledge base without ``storeNamespace`` keeps this project's layout (``eddi_kb_<id>``, our columns): nothing of
ours moves; but a pgvector ``table`` it names that exists in langchain4j's layout (``embedding_id``, no ``id``) is
EDDI's, named through EDDI's own parameter: it is read and written in place as EDDI's name layout (EDDI's reading of no
namespace), chunks tagged ``kbId=<name>`` (adopting it is an admin's act: stores.ownership).

langchain4j's rows: pgvector ``embedding_id UUID PRIMARY KEY, embedding vector(n), text TEXT, metadata JSON``;
Chroma a record per segment (UUID id, the text as its document, flat metadata); Qdrant a point per segment
(UUID id, ``text_segment`` and the metadata flat in its payload); Atlas a document per segment (``_id`` a UUID,
``embedding``, ``text``, ``metadata``);
its metadata values are strings and numbers only (``Metadata`` refuses others). So a chunk we write there
gets a UUID derived from our chunk id (kept in metadata as ``chunkId``), booleans as ``"true"``/``"false"`` with a
mark beside (``<key>__boolean: 1``: they read back as booleans, and a filter comparing a string with the key passes
them by, as the reference does; ``private`` and ``expires`` are always booleans), no null values; a list
or object (a chunk's ``boxes``) as JSON text, read back as it was (``jsonKeys`` names them).
EDDI's own chunks carry ``source`` (the document's name) and, from source runs, ``documentId``: they read
here with ``document_id`` taken from those."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

from eddi_rag.stores import filters

NAMESPACES = ("name", "id")
LAYOUT = "langchain4j"
NAME_TAG = "eddiName"  # pgvector: the kbId to tag chunks with when an explicit table turns out to be EDDI's
LANGUAGE = "kbLanguage"  # (given by the store factory) the knowledge base's language setting, for the engines that analyse by it
FLAGS = ("private", "expires")  # our boolean metadata, read back as booleans
JSON_KEYS = "jsonKeys"  # the keys whose values were lists or objects, written as JSON text
BOOLEAN = "__boolean"  # + 1 beside a key whose value was a boolean (written as "true"/"false")
_NAMESPACE = uuid.UUID("6f1d1c52-3b7e-4d55-9a0e-1b6c0e7d2a41")  # chunk id -> embedding_id (uuid5)
MAX_PG_IDENTIFIER = 63


def _sanitise(value: str) -> str:
    return re.sub(r"[^a-z0-9_]", "_", value.lower())


def physical_name(store_type: str, namespace: str, kb_id: str, name: str) -> str:
    """EDDI's default table (collection) of a knowledge base in ``namespace``."""
    if store_type == "mongodb-atlas" and namespace != "id":
        return f"eddi_kb_{name}"  # (EDDI's defaultPhysicalName: LEGACY_PREFIX + name, for Atlas alone)
    base = f"eddi_kbid_{_sanitise(kb_id)}" if namespace == "id" else f"eddi_kb_{_sanitise(name)}"
    if store_type == "pgvector":
        return base[:MAX_PG_IDENTIFIER]
    return base if namespace == "id" else base.rstrip("_")  # EDDI's legacyCollectionName drops trailing _


def adopt(store_type: str, namespace: str | None, kb_id: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """The store parameters of a knowledge base in EDDI's ``namespace`` (None: ours, unchanged, but for a pgvector
    table named explicitly: if it is found in langchain4j's layout, the store reads it as EDDI's name layout,
    tagging chunks with ``name``)."""
    if namespace is None:
        return {**params, NAME_TAG: name} if store_type == "pgvector" and params.get("tableName") else params
    out = {**params, "layout": LAYOUT}
    if store_type == "pgvector":
        out["tableName"] = params.get("tableName") or physical_name(store_type, namespace, kb_id, name)
        if not params.get("url"):  # EDDI's connection defaults
            out.setdefault("database", "eddi")
            out.setdefault("user", "eddi")
    else:
        out["collectionName"] = params.get("collectionName") or physical_name(store_type, namespace, kb_id, name)
    if namespace == "id" and filters_retrieval(store_type, params):
        out["kbTag"] = kb_id  # retrieval sees only the chunks tagged with this knowledge base's id
    return out


def filters_retrieval(store_type: str, params: dict[str, Any]) -> bool:
    """Whether EDDI's ``"id"`` layout filters retrieval on ``kbId`` here (``KnowledgeBaseStorage.filtersRetrieval``):
    everywhere, but on Atlas only in a collection named outright (its default one is the knowledge base's own)."""
    return store_type != "mongodb-atlas" or bool(str(params.get("collectionName") or "").strip())


def row_id(chunk_id: str) -> str:
    """The ``embedding_id`` of a chunk: a UUID stays itself (EDDI's rows), our ids map to a stable uuid5."""
    try:
        return str(uuid.UUID(chunk_id))
    except ValueError:
        return str(uuid.uuid5(_NAMESPACE, chunk_id))


def encode(chunk_id: str, metadata: dict[str, Any]) -> dict[str, Any]:
    """Metadata as langchain4j reads it: strings and numbers, our chunk id beside them; a list or an object (a
    chunk's ``boxes``) as its JSON text, its key named in ``jsonKeys``."""
    out: dict[str, Any] = {}
    structured = []
    for key, value in metadata.items():
        if value is None:
            continue
        if isinstance(value, (list, dict)):
            out[key] = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
            structured.append(key)
            continue
        if isinstance(value, bool):  # a string to langchain4j; the key remembered as a boolean's (filters, decode)
            out[key] = "true" if value else "false"
            if key not in FLAGS:
                out[key + BOOLEAN] = 1
            continue
        out[key] = value
    if structured:
        out[JSON_KEYS] = ",".join(structured)
    out["chunkId"] = chunk_id
    return out


def encode_value(value: Any) -> Any:
    """A filter's value compared the way ``encode`` stored it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return [encode_value(v) for v in value]
    return value


POSITIVE = ("$eq", "$gt", "$gte", "$lt", "$lte", "$in")
NEVER_BOOLEAN = frozenset({"document_id", "source", "kbId", "chunkId", *FLAGS})  # (no guard on the hot paths' fields)


def encode_node(node: Any) -> Any:
    """A filter tree comparing values the way ``encode`` stored them (for filters run on the stored rows). A boolean is
    stored as the string ``"true"``/``"false"``, so a string compared with a field that held a boolean must not match
    it (the reference compares values of one type only: ``{"even": {"$gt": "doc1.md"}}`` matches no boolean): such a
    comparison is guarded by the boolean's mark (``<field>__boolean``, written beside it since 2026-11; a row written
    before has none, and compares as it did)."""
    if isinstance(node, (filters.And, filters.Or)):
        return type(node)(tuple(encode_node(n) for n in node.children))
    if node.op in filters.CONTAINS or node.field in NEVER_BOOLEAN or node.value == ():
        return filters.Compare(node.field, node.op, tuple(encode_value(list(node.value))) if isinstance(node.value, tuple)
                               else encode_value(node.value))
    values = node.value if isinstance(node.value, tuple) else (node.value,)
    truths = tuple(encode_value(v) for v in values if isinstance(v, bool))
    others = tuple(v for v in values if not isinstance(v, bool))
    listed = node.op in filters.LISTED
    mark = node.field + BOOLEAN

    def compare(vals: tuple[Any, ...]) -> filters.Compare:
        return filters.Compare(node.field, node.op, vals if listed else vals[0])

    parts: list[filters.Node] = [compare(truths)] if truths else []
    if node.op in POSITIVE:  # a boolean's value, or another's on a field that held no boolean
        parts += [filters.And((compare(others), filters.Compare(mark, "$ne", 1)))] if others else []
        return parts[0] if len(parts) == 1 else filters.Or(tuple(parts))
    # $ne / $nin: true of a boolean for a value that is none (each value excluded, as its type says)
    parts += [filters.Or((compare(others), filters.Compare(mark, "$eq", 1)))] if others else []
    return parts[0] if len(parts) == 1 else filters.And(tuple(parts))


def decode(row_id_: str, metadata: dict[str, Any] | None) -> tuple[str, dict[str, Any]]:
    """(our chunk id, our metadata) of a row, ours or EDDI's."""
    out = dict(metadata or {})
    chunk_id = str(out.pop("chunkId", None) or row_id_)
    for key in str(out.pop(JSON_KEYS, "") or "").split(","):
        if isinstance(out.get(key), str):
            try:
                out[key] = json.loads(out[key])
            except ValueError:
                pass  # (a row someone else wrote: kept as the text it is)
    for flag in FLAGS:
        if out.get(flag) in ("true", "false"):
            out[flag] = out[flag] == "true"
    for mark in [k for k in out if k.endswith(BOOLEAN)]:
        key = mark[:-len(BOOLEAN)]
        if out.pop(mark) == 1 and out.get(key) in ("true", "false"):
            out[key] = out[key] == "true"
    if "document_id" not in out and (out.get("documentId") or out.get("source")):
        out["document_id"] = out.get("documentId") or out.get("source")
    return chunk_id, out
