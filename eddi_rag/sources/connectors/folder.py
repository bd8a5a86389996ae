"""A folder on the server: every file of a supported type under it (recursively; hidden files and
folders skipped), selected by include/exclude globs on its path under the folder. The folder must
lie inside one of ``EDDI_RAG_FOLDER_ROOTS`` (paths separated by ``os.pathsep``; default: the
server's working directory), so a configuration cannot make the server read anywhere it may: the
folder when saved and run, and each file's real path (symlinks resolved) when listed and read."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import Field

from eddi_rag.common.paths import folder_roots, in_folder_roots
from eddi_rag.config import IngestionSource
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.loaders import EXTENSIONS
from eddi_rag.sources.base import Connector, Globs, Item, Listing, Settings, Sink, SourceContext, SyncEnd, feed, on_server, selected


class FolderSettings(Settings):
    """The files under a folder on the server."""

    path: str = on_server("A folder on the server, inside EDDI_RAG_FOLDER_ROOTS (default: the server's working directory).")
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the path under the folder (* crosses folders).")
    exclude: Globs = Field(default_factory=list)



class FolderNotAllowedError(EddiRagError, ValueError):
    status = 400
    pass


def check_folder(path: str) -> Path:
    folder = Path(path).expanduser().resolve()
    allowed = folder_roots()
    if not in_folder_roots(folder, allowed):
        raise FolderNotAllowedError(f"folder {path!r} is outside the allowed roots ({', '.join(map(str, allowed))}); "
                                    f"set EDDI_RAG_FOLDER_ROOTS to allow it")
    if not folder.is_dir():
        raise FolderNotAllowedError(f"folder {path!r} does not exist or is not a folder")
    return folder


def item(source_id: str, folder: Path, rel: str, max_bytes: int | None = None) -> Item:
    """The document at ``rel`` (a posix path under ``folder``): id ``<source id>/<rel>``, cited as ``rel``.
    Its real path is checked against the roots again when it is read, and its size against ``max_bytes``
    (the upload limit (``EDDI_RAG_MAX_UPLOAD_MB``)) before it is."""
    path = folder / rel

    def read() -> tuple[bytes, None]:
        if not in_folder_roots(path):
            raise FolderNotAllowedError(f"{rel}: its real path (a symlink?) is outside the folders sources may read")
        real = path.resolve()
        if max_bytes is not None and (size := real.stat().st_size) > max_bytes:
            raise FolderNotAllowedError(f"{rel}: {size:,} bytes, over the limit of {max_bytes:,} "
                                        "(settings.maxBytesPerPage or EDDI_RAG_MAX_UPLOAD_MB): not read")
        return real.read_bytes(), None

    return Item(f"{source_id}/{rel}", rel, read)


def listing(source_id: str, spec: FolderSettings, max_bytes: int | None = None) -> Listing:
    folder = check_folder(spec.path)
    allowed = folder_roots()
    out = Listing()
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if any(part.startswith(".") for part in path.relative_to(folder).parts) or not path.is_file():
            continue
        if path.suffix.lower() in EXTENSIONS and selected(rel, spec.include, spec.exclude):
            if not in_folder_roots(path, allowed):  # a symlink (or a file under a linked folder) pointing out of the roots
                out.failures.append({"document": rel, "reason": "its real path (a symlink?) is outside the folders "
                                                                "sources may read (EDDI_RAG_FOLDER_ROOTS)"})
                continue
            out.items.append(item(source_id, folder, rel, max_bytes))
    return out


class FolderConnector(Connector[FolderSettings]):
    type = "folder"
    configuration = FolderSettings
    needs = "a folder on the server inside EDDI_RAG_FOLDER_ROOTS"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"folder {spec.path}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        check_folder(self.spec(source).path)  # a folder we may not read is a 400 now, not a FAILED run later

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        os.listdir(check_folder(self.spec(source).path))  # (an unmounted or unreadable folder raises)

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        return feed(listing(source.effective_id, self.spec(source), ctx.max_bytes), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return item(source.effective_id, check_folder(self.spec(source).path), name, ctx.max_bytes)


CONNECTOR = FolderConnector()
