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
A configuration is held against these rules when it is saved (``verbs.knowledge_bases.path_errors``).
"""

from __future__ import annotations

import os
from pathlib import Path

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
