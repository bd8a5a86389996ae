"""Where a configuration may point the server's file system.

* Data files a configuration names (``storeParameters.path`` of sqlite, sqlite-vec, Qdrant's local
  mode) lie under the data directory or a folder in ``EDDI_RAG_PATH_ROOTS`` (folders separated by
  ``os.pathsep``); a relative path is taken under the data directory.
* Model files (``modelPath`` / ``tokenizerPath`` of the local embedding model and the cross-encoder
  reranker) are read only from folders the operator lists in ``EDDI_RAG_MODEL_ROOTS`` (default:
  none; the packaged model needs no path).
* Folder sources lie under a folder in ``EDDI_RAG_FOLDER_ROOTS`` (default: the server's working
  directory), checked when the configuration is saved and again for every file's real path when read.
* Web and sitemap sources name no cloud metadata or link-local address (``OutboundPolicy.check_static``;
  what their host resolves to is checked when they run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from eddi_rag.config import RagConfiguration
from eddi_rag.outbound import OutboundBlockedError, OutboundPolicy

IN_MEMORY = ":memory:"


def roots(variable: str, base: Path | None = None) -> list[Path]:
    raw = os.environ.get(variable, "")
    listed = [Path(p).expanduser().resolve() for p in raw.split(os.pathsep) if p.strip()]
    return ([base.resolve()] if base is not None else []) + listed


def folder_roots() -> list[Path]:
    """Where folder sources may read (EDDI_RAG_FOLDER_ROOTS; default: the working directory)."""
    raw = os.environ.get("EDDI_RAG_FOLDER_ROOTS")
    return roots("EDDI_RAG_FOLDER_ROOTS") if raw else [Path.cwd().resolve()]


def inside(path: Path, allowed: list[Path]) -> bool:
    """Whether ``path`` (resolved) is one of ``allowed`` or under one."""
    return any(path == root or root in path.parents for root in allowed)


def in_folder_roots(path: str | Path, allowed: list[Path] | None = None) -> bool:
    """Whether ``path``'s real location (``~`` expanded, symlinks resolved) lies in a folder source root
    (``allowed``: folder_roots(), when a caller checks many paths)."""
    return inside(Path(path).expanduser().resolve(), folder_roots() if allowed is None else allowed)


def resolve(value: str, data_dir: Path | None) -> Path:
    path = Path(value).expanduser()
    return (path if path.is_absolute() or data_dir is None else data_dir / path).resolve()


def errors(config: RagConfiguration, data_dir: Path | None) -> list[dict[str, Any]]:
    """The configuration's file paths that fall outside what the server allows, as validation errors."""
    out: list[dict[str, Any]] = []
    store_path = config.storeParameters.get("path")
    if isinstance(store_path, str) and store_path != IN_MEMORY:
        allowed = roots("EDDI_RAG_PATH_ROOTS", data_dir)
        if not inside(resolve(store_path, data_dir), allowed):
            where = ", ".join(map(str, allowed)) or "none: this server keeps its data in memory"
            out.append({"path": "$.storeParameters.path", "value": store_path,
                        "message": f"must lie under the data directory or EDDI_RAG_PATH_ROOTS ({where})"})
    models = roots("EDDI_RAG_MODEL_ROOTS")
    for group, params in (("embeddingParameters", config.embeddingParameters), ("rerankerParameters", config.rerankerParameters)):
        for key in ("modelPath", "tokenizerPath"):
            value = params.get(key)
            if isinstance(value, str) and not inside(resolve(value, None), models):
                out.append({"path": f"$.{group}.{key}", "value": value,
                            "message": "model files are read only from folders the operator lists in EDDI_RAG_MODEL_ROOTS "
                                       f"({', '.join(map(str, models)) or 'none set'})"})
    for i, source in enumerate(config.sources):
        where = f"$.sources[{i}]"
        if source.folder is not None and not in_folder_roots(source.folder.path):
            out.append({"path": f"{where}.folder.path", "value": source.folder.path,
                        "message": f"is outside the folders sources may read ({', '.join(map(str, folder_roots()))}); "
                                   "the operator allows more with EDDI_RAG_FOLDER_ROOTS"})
        for kind, url in (("web.startUrl", source.web.startUrl if source.web else None),
                          ("sitemap.url", source.sitemap.url if source.sitemap else None)):
            if url is not None:
                try:
                    OutboundPolicy.check_static(url)
                except OutboundBlockedError as e:
                    out.append({"path": f"{where}.{kind}", "value": url, "message": str(e)})
    return out
