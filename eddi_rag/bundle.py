"""Load a folder of resources (``<kind>/<id>.json``, e.g. ``examples/workflows/``) into a store.

Resource ids are the file names, so the URIs inside the files can name each other. A resource
that already exists is updated when its content differs, so loading twice is harmless.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eddi_rag.config import ConfigValidationError, validate_rag_configuration
from eddi_rag.embeddings.references import entry_errors
from eddi_rag.resources import ResourceNotFoundError, ResourceRef, ResourceStore

# Referenced kinds first, so a reader never sees a dangling URI.
LOAD_ORDER = ("providers", "rags", "httpcalls", "llm", "workflows", "agents")


def load_bundle(
    resources: ResourceStore,
    folder: str | Path,
    patch: Callable[[str, str, dict[str, Any]], dict[str, Any]] | None = None,
) -> list[ResourceRef]:
    """``patch(kind, id, data)`` may adjust a resource before it is stored."""
    folder = Path(folder)
    loaded = []
    for kind in LOAD_ORDER:
        for path in sorted((folder / kind).glob("*.json")):
            data = json.loads(path.read_text(encoding="utf-8"))
            if patch is not None:
                data = patch(kind, path.stem, data)
            if kind == "rags":
                validate_rag_configuration(data)
            if kind == "providers" and (errors := entry_errors(data)):
                raise ConfigValidationError(errors)
            id = path.stem
            try:
                current = resources.current_version(kind, id)
            except ResourceNotFoundError:
                loaded.append(resources.create(kind, data, id=id))
                continue
            if resources.read(kind, id, current) != data:
                loaded.append(resources.update(kind, id, current, data))
            else:
                loaded.append(ResourceRef(kind, id, current))
    return loaded
