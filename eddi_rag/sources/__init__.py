"""Sources a knowledge base is kept in sync with: a website, uploaded files, a folder, a sitemap.

Each kind lists its documents (``Listing``: items, and whether the listing is complete); the sync
engine (``verbs.sources``) reconciles the knowledge base with it."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import PurePosixPath
from typing import Any

from eddi_rag.ingest.loaders import EXTENSIONS


@dataclass
class Item:
    document_id: str  # the store's document id
    name: str  # what citations show; its extension helps decide the type
    fetch: Callable[[], tuple[bytes, str | None]]  # the bytes and their Content-Type
    acl: list[str] | None = None  # who may read it, as its source says (a connector's own); None: the source's default
    version: str | None = None  # the source's token for this version (an ETag, a content hash): equal means unchanged, unread
    url: str | None = None  # where a reader opens it (a citation's link), kept on its chunks as ``url``
    media_type: str | None = None  # its type as the source says, when its fetch gives none
    metadata: dict[str, Any] = field(default_factory=dict)  # more the source says of it, kept on its chunks


def holding(body: bytes, content_type: str | None = None) -> Callable[[], tuple[bytes, str | None]]:
    """The fetch of a document already read (what a loader handed over)."""
    return lambda: (body, content_type)


@dataclass
class Listing:
    items: list[Item] = field(default_factory=list)
    complete: bool = True  # every document of the source was seen: those not listed are gone
    failures: list[dict[str, str]] = field(default_factory=list)  # {document, reason} met while listing
    notes: list[str] = field(default_factory=list)  # why the listing is not complete
    stopped: str | None = None  # the limit that cut the listing short (maxPages, timeBudgetMinutes)

    def stop(self, reason: str) -> None:
        """The listing ends at a limit: incomplete, and the run says which."""
        self.complete, self.stopped = False, reason
        self.notes.append(reason)


def folder_prefix(prefix: str) -> str:
    """A bucket's or container's prefix as a folder: ``""`` or ``"a/b/"``."""
    prefix = prefix.strip("/")
    return f"{prefix}/" if prefix else ""


def object_taken(out: Listing, name: str, prefix: str, size: int | None, include: list[str], exclude: list[str],
                 max_bytes: int | None) -> str | None:
    """The name under ``prefix`` of a stored object a listing takes: a supported type that the globs select, within
    ``max_bytes`` (one over it is put in ``out``'s failures, never read); None: left out."""
    rel = name[len(prefix):]
    if not rel or PurePosixPath(rel).suffix.lower() not in EXTENSIONS or not selected(rel, include, exclude):
        return None
    if max_bytes is not None and (size or 0) > max_bytes:
        out.failures.append({"document": rel, "reason": f"{size:,} bytes, over the limit of {max_bytes:,} "
                                                        "(EDDI_RAG_MAX_UPLOAD_MB): not read"})
        return None
    return rel


def selected(path: str, include: list[str], exclude: list[str]) -> bool:
    """``path`` matches an include glob (none: everything) and no exclude glob; ``*`` crosses ``/``."""
    if include and not any(fnmatch.fnmatchcase(path, g) for g in include):
        return False
    return not any(fnmatch.fnmatchcase(path, g) for g in exclude)


@lru_cache(maxsize=1024)
def _glob(pattern: str) -> re.Pattern[str]:
    if not pattern.startswith(("/", "**")):
        pattern = "**/" + pattern  # "*.pdf" means a PDF at any depth
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        out.append({"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i])))
        i += 1
    return re.compile("".join(out))


def path_glob(path: str, pattern: str) -> bool:
    """EDDI's exclude patterns on a URL path: ``*`` stays inside one segment, ``**`` crosses them, ``?``
    is one character but ``/``; a pattern not starting with ``/`` or ``**`` matches at any depth."""
    return _glob(pattern.strip()).fullmatch(path) is not None
