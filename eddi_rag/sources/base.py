"""The one protocol every kind of source implements, in the spirit of EDDI's ``SourceConnector`` (labsai/EDDI PR #798):
a connector has a ``type``, checks its configuration (``validate``), and syncs the source into a ``Sink`` that is told,
document by document, what the source holds (``document``), what it knows did not change (``unchanged``), what it says
was deleted (``deleted``, a delta feed's explicit delete) and what it could not read (``error``). The sync engine
(``verbs.sources``) is the sink that ingests; a preview is a sink that only looks.

A sync that saw every document of the source ends ``complete`` (the documents it did not name are gone: deletion by
absence); one cut short at a limit, or a delta, concludes nothing about what it did not name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.config import IngestionSource
from eddi_rag.errors import EddiRagError
from eddi_rag.sources import Item, Listing


@dataclass(frozen=True)
class SourceContext:
    """What a connector may use, for one knowledge base: where its files live, the outbound guard every endpoint
    passes, vault references resolved in the knowledge base's tenant, an upload source's files, and when to stop."""

    kb_id: str
    tenant: str
    data_dir: Path | None
    outbound: OutboundPolicy
    resolve: Any  # Callable[[Any], Any]: a value with its ${vault:…} references resolved in the tenant
    files: Any  # sources.upload.Files: what upload sources hold
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
    type: str  # the source's "type"
    needs: str  # what a source of this type needs, as the Manager's source card says it

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
