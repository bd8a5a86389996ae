"""Load a folder of resources (``<kind>/<id>.json``, e.g. ``examples/workflows/``) into a store.

Resource ids are the file names, so the URIs inside the files can name each other. A resource
that already exists is updated when its content differs, so loading twice is harmless.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eddi_rag.resource_types import DEFAULT_TENANT, ResourceRef
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
