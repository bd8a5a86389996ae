"""A folder on the server: every file of a supported type under it (recursively; hidden files and
folders skipped), selected by include/exclude globs on its path under the folder. The folder must
lie inside one of ``EDDI_RAG_FOLDER_ROOTS`` (paths separated by ``os.pathsep``; default: the
server's working directory), so a configuration cannot make the server read anywhere it may."""

from __future__ import annotations

import os
from pathlib import Path

from eddi_rag.config import FolderSource
from eddi_rag.ingest.loaders import FORMATS
from eddi_rag.sources import Item, Listing, selected

EXTENSIONS = {ext for f in FORMATS.values() for ext in f.extensions}


class FolderNotAllowedError(ValueError):
    pass


def roots() -> list[Path]:
    raw = os.environ.get("EDDI_RAG_FOLDER_ROOTS")
    parts = raw.split(os.pathsep) if raw else [os.getcwd()]
    return [Path(p).resolve() for p in parts if p.strip()]


def check_folder(path: str) -> Path:
    folder = Path(path).expanduser().resolve()
    allowed = roots()
    if not any(folder == r or r in folder.parents for r in allowed):
        raise FolderNotAllowedError(f"folder {path!r} is outside the allowed roots ({', '.join(map(str, allowed))}); "
                                    f"set EDDI_RAG_FOLDER_ROOTS to allow it")
    if not folder.is_dir():
        raise FolderNotAllowedError(f"folder {path!r} does not exist or is not a folder")
    return folder


def item(source_id: str, folder: Path, rel: str) -> Item:
    """The document at ``rel`` (a posix path under ``folder``): id ``<source id>/<rel>``, cited as ``rel``."""
    path = folder / rel
    return Item(f"{source_id}/{rel}", rel, lambda: (path.read_bytes(), None))


def listing(source_id: str, spec: FolderSource) -> Listing:
    folder = check_folder(spec.path)
    out = Listing()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in path.relative_to(folder).parts) or not path.is_file():
            continue
        if path.suffix.lower() in EXTENSIONS and selected(rel, spec.include, spec.exclude):
            out.items.append(item(source_id, folder, rel))
    return out
