"""Load a folder of resources (``<kind>/<id>.json``, e.g. ``examples/workflows/``) into a store, and the
documents of its knowledge bases: ``documents/<kb id>/`` inside the folder or beside it (``examples/documents/``).

Resource ids are the file names, so the URIs inside the files can name each other. A resource
that already exists is updated when its content differs, so loading twice is harmless; a document is queued
again under its file name (its unchanged chunks keep their vectors).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eddi_rag.resource_types import DEFAULT_TENANT, ResourceRef
from eddi_rag.verbs.ingesting import Ingesting
from eddi_rag.verbs.saving import Saving

# Referenced kinds first, so a reader never sees a dangling URI.
LOAD_ORDER = ("providers", "rags", "httpcalls", "llm", "workflows", "agents")


def load_bundle(
    saving: Saving,
    folder: str | Path,
    patch: Callable[[str, str, dict[str, Any]], dict[str, Any]] | None = None,
    tenant: str = DEFAULT_TENANT,
) -> list[ResourceRef]:
    """Every resource of ``folder`` saved (``Saving.put``: the save rules apply) into ``tenant``;
    ``patch(kind, id, data)`` may adjust a resource before it is saved."""
    folder = Path(folder)
    loaded = []
    for kind in LOAD_ORDER:
        for path in sorted((folder / kind).glob("*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            if patch is not None:
                data = patch(kind, path.stem, data)
            loaded.append(saving.put(kind, path.stem, data, tenant))
    return loaded


def documents_of(folder: str | Path, kb_ids: list[str]) -> dict[str, tuple[Path, list[Path]]]:
    """The document folder and files of each knowledge base ``kb_ids`` names: ``<folder>/documents/<id>/`` or,
    beside the folder, ``<folder>/../documents/<id>/`` (every file a loader reads, recursively)."""
    folder = Path(folder)
    out: dict[str, tuple[Path, list[Path]]] = {}
    for kb in kb_ids:
        root = next((r for r in (folder / "documents" / kb, folder.parent / "documents" / kb) if r.is_dir()), None)
        if root is not None:
            out[kb] = root, sorted(p for p in root.rglob("*") if p.is_file() and p.suffix.lower() in Ingesting.file_endings())
    return out


def queue_documents(ingesting: Ingesting, folder: str | Path, loaded: list[ResourceRef]) -> list[tuple[str, str]]:
    """Queue the documents of the knowledge bases ``loaded`` from ``folder`` (``documents_of``), each named by its
    path in its knowledge base's folder, replacing what that name held; [(kb id, document name)]."""
    queued = []
    for kb, (root, paths) in documents_of(folder, [r.id for r in loaded if r.kind == "rags"]).items():
        for path in paths:
            name = path.relative_to(root).as_posix()
            ingesting.submit(kb, name, path.read_bytes(), replace=True)
            queued.append((kb, name))
    return queued
