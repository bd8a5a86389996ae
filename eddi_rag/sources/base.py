"""The one protocol every kind of source implements, in the spirit of EDDI's ``SourceConnector`` (labsai/EDDI PR #798):
a connector has a ``type``, checks its configuration (``validate``), and syncs the source into a ``Sink`` that is told,
document by document, what the source holds (``document``), what it knows did not change (``unchanged``), what it says
was deleted (``deleted``, a delta feed's explicit delete) and what it could not read (``error``). The sync engine
(``verbs.sources``) is the sink that ingests; a preview is a sink that only looks.

A sync that saw every document of the source ends ``complete`` (the documents it did not name are gone: deletion by
absence); one cut short at a limit, or a delta, concludes nothing about what it did not name.
"""

from __future__ import annotations

import builtins
import fnmatch
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path, PurePosixPath
from typing import Annotated, Any, Generic, Protocol, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field

from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.config import IngestionSource
from eddi_rag.errors import EddiRagError
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
                                                        "(settings.maxBytesPerPage or EDDI_RAG_MAX_UPLOAD_MB): not read"})
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



@dataclass(frozen=True)
class SourceContext:
    """What a connector may use, for one knowledge base: where its files live, the outbound guard every endpoint
    passes, vault references resolved in the knowledge base's tenant, an upload source's files, and when to stop."""

    kb_id: str
    tenant: str
    data_dir: Path | None
    outbound: OutboundPolicy
    resolve: Any  # Callable[[Any], Any]: a value with its ${vault:…} references resolved in the tenant
    files: Any  # sources.files.Files: what upload sources hold
    max_bytes: int | None = None  # a document over this many bytes is refused before it is read
    deadline: float | None = None  # time.monotonic() by which a listing stops (timeBudgetMinutes)


class Sink(Protocol):
    def document(self, item: Item) -> bool:
        """A document of the source, new or changed as far as the connector knows; False: stop (a limit reached)."""

    def unchanged(self, document_id: str) -> None:
        """A document the source says did not change since the cursor (nothing is read)."""

    def deleted(self, document_id: str) -> None:
        """A document the source says was deleted (a delta feed's explicit delete)."""

    def error(self, document_id: str, reason: str) -> None:
        """A document the connector could not read; the others go on."""


@dataclass
class SyncEnd:
    """How a sync ended: ``complete`` when every document of the source was named (the rest are gone), ``stopped``
    the limit that cut it short, ``notes`` why it is not complete, ``cursor`` where the next sync resumes (None: a
    full listing again); ``relisted``: a full listing after an expired cursor, which stands in for the deletions the
    cursor's changes would have told (what it lacks is gone at once)."""

    complete: bool = True
    stopped: str | None = None
    notes: list[str] = field(default_factory=list)
    cursor: str | None = None
    relisted: bool = False  # a full listing standing in for the changes an expired cursor no longer tells


class SourceConnector(Protocol):
    type: str  # the source's "type", and the name of the block that holds its configuration
    needs: str  # what a source of this type needs, as the Manager's source card says it

    @property
    def configuration(self) -> builtins.type[BaseModel] | None:
        """Its block's fields (None: it has no block, as upload): the JSON Schema's source block, the docs' field table
        and the Manager's card are generated from it (``Settings``'s markers)."""

    def where(self, source: IngestionSource) -> str:
        """What the source reads, in a few words (its card's heading): ``s3://bucket/prefix``, ``mail bob@host INBOX``."""

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        """Raise an error naming the field when ``source`` cannot be synced (a folder outside the roots, a URL the
        outbound guard refuses); cheap: no document is read."""

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        """Raise, saying why, unless the source can be read now (its folder, its start page, its sitemap): asked when
        a source that held documents lists none, which deletes nothing until this passes."""

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        """Tell ``sink`` what the source holds (from ``cursor``, when the connector keeps one; CursorExpiredError,
        before the sink is told anything, when the source no longer knows it)."""

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        """One document fetched alone (a retry of a failed one)."""


class Settings(BaseModel):
    """A connector's block. Its fields' descriptions are what the schema, the docs and the Manager say of them; a
    field marked ``secret()`` holds a vault reference (the Manager offers "store in the vault", a save moves a typed
    value into the vault), ``outbound()`` a URL the outbound guard checks when the configuration is saved,
    ``on_server()`` a folder (or ``file://`` URL) that must lie in EDDI_RAG_FOLDER_ROOTS."""
    model_config = ConfigDict(extra="ignore")


Text = Annotated[str, Field(min_length=1)]
Globs = list[Text]
URL_PATTERN = r"^https?://"


def secret(description: str, required: bool = False) -> Any:
    return Field(... if required else None, min_length=1, description=description, json_schema_extra={"writeOnly": True})


def outbound(default: Any = ..., description: str | None = None, pattern: str = URL_PATTERN) -> Any:
    return Field(default, pattern=pattern, description=description, json_schema_extra={"x-outbound": True})


def on_server(description: str, pattern: str | None = None) -> Any:
    return Field(min_length=1, pattern=pattern, description=description, json_schema_extra={"x-on-server": True})


S = TypeVar("S", bound=BaseModel)


class Connector(Generic[S]):
    """What a connector with a block shares: its block read as its ``configuration``."""
    type: str
    configuration: builtins.type[S]

    def spec(self, source: IngestionSource) -> S:
        return self.configuration.model_validate(source.block(self.type) or {})


@dataclass
class Permissions:
    """What a source's permission listing says now: who may read each document asked about (``[]``: nobody, such as
    a document the source no longer has), and which groups each user is in, from the source's directory."""

    acls: dict[str, list[str]] = field(default_factory=dict)
    groups: dict[str, list[str]] = field(default_factory=dict)
    failures: list[dict[str, str]] = field(default_factory=list)  # {document, reason}: left as they were


class PermissionSource(Protocol):
    """A connector whose source keeps its own permissions, listed apart from the documents (issue 44: synced on their
    own schedule, without reading or embedding anything again)."""

    def keeps_permissions(self, source: IngestionSource) -> bool:
        """Whether this source's documents are read by whom the source says (its configuration may turn it off)."""

    def permissions(self, ctx: SourceContext, source: IngestionSource, document_ids: list[str]) -> Permissions:
        """Who may read each of ``document_ids`` now, and the groups of the users the source's directory knows."""


def keeps_permissions(connector: SourceConnector, source: IngestionSource) -> bool:
    keeps = getattr(connector, "keeps_permissions", None)
    return bool(keeps and keeps(source))


def feed(listing: Listing, sink: Sink) -> SyncEnd:
    """A whole listing told to ``sink``: its failures, then its documents until the sink stops."""
    for failure in listing.failures:
        sink.error(failure["document"], failure["reason"])
    for item in listing.items:
        if not sink.document(item):
            return SyncEnd(False, listing.stopped, listing.notes)
    return SyncEnd(listing.complete, listing.stopped, listing.notes)


class CursorExpiredError(EddiRagError, LookupError):
    """A connector's cursor the source no longer knows (an expired delta token, a commit no longer in the branch): the
    sync engine lists the source in full instead, which is not an error."""
    status = 409


def cursor_part(cursor: str | None, key: str, kind: str) -> dict[str, Any] | None:
    """The object under ``key`` of a connector's JSON cursor (None: no cursor); CursorExpiredError when ``cursor`` is
    not one of ``kind``'s (a full listing follows)."""
    if cursor is None:
        return None
    try:
        part = json.loads(cursor)[key]
        assert isinstance(part, dict)
    except (ValueError, KeyError, TypeError, AssertionError):
        raise CursorExpiredError(f"not a cursor of a {kind} source") from None
    return part


class FileNotFoundInSourceError(EddiRagError, LookupError):
    status = 404


def gone(name: str, document_id: str | None = None) -> Item:
    """A document its source no longer holds (its id: ``document_id``, else ``name``): reading it fails, naming it."""
    def fetch() -> tuple[bytes, str | None]:
        raise FileNotFoundInSourceError(f"{name}: the file is no longer in the source")
    return Item(document_id or name, name, fetch)


class _Finder:
    """A sink that looks for one document and stops there."""

    def __init__(self, document_id: str):
        self.document_id, self.found = document_id, cast(Item | None, None)

    def document(self, item: Item) -> bool:
        if item.document_id == self.document_id:
            self.found = item
        return self.found is None

    def unchanged(self, document_id: str) -> None:
        pass

    def deleted(self, document_id: str) -> None:
        pass

    def error(self, document_id: str, reason: str) -> None:
        pass


def listed_again(connector: SourceConnector, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
    """``one`` for a connector whose documents cannot be fetched alone: the source listed again, up to the document."""
    finder = _Finder(document_id)
    connector.sync(ctx, source, None, finder)
    return finder.found or gone(name, document_id)
