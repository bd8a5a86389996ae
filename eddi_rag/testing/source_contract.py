"""The contract every source connector passes (``sources.base.SourceConnector``), as the store conformance suite is for
stores. A connector joins by giving a ``world`` fixture: a source it can sync and a way to change what that source
holds::

    from eddi_rag.testing import SourceContract

    class TestMyConnector(SourceContract):
        @pytest.fixture
        def world(self, tmp_path):
            yield MyWorld(...)  # .connector, .source, .ctx, .put(name, text), .remove(name)

Documents are recognised by what they say: ``put`` writes a text holding a unique token, and the suite checks that
each token is read from exactly one named document (a web crawl may name its index page too).
"""

from __future__ import annotations

import uuid
from typing import Any, Protocol

import pytest

from eddi_rag.config import IngestionSource
from eddi_rag.sources.base import Item, SourceConnector, SourceContext, SyncEnd


class World(Protocol):
    connector: SourceConnector
    source: IngestionSource
    ctx: SourceContext

    def put(self, name: str, text: str) -> None:
        """Add the document ``name`` (``a.md``), or change it, so that it reads ``text``."""

    def remove(self, name: str) -> None:
        """Take the document ``name`` out of the source."""


class Recorder:
    """A sink that reads every document it is told of; ``stop_after``: say stop after that many."""

    def __init__(self, stop_after: int | None = None):
        self.stop_after = stop_after
        self.documents: dict[str, bytes] = {}
        self.items: dict[str, Item] = {}
        self.unchanged_ids: list[str] = []
        self.deleted_ids: list[str] = []
        self.errors: list[tuple[str, str]] = []
        self.named: list[str] = []

    def document(self, item: Item) -> bool:
        self.named.append(item.document_id)
        self.items[item.document_id] = item
        self.documents[item.document_id] = item.fetch()[0]
        return self.stop_after is None or len(self.named) < self.stop_after

    def unchanged(self, document_id: str) -> None:
        self.unchanged_ids.append(document_id)

    def deleted(self, document_id: str) -> None:
        self.deleted_ids.append(document_id)

    def error(self, document_id: str, reason: str) -> None:
        self.errors.append((document_id, reason))


def token() -> str:
    return f"token{uuid.uuid4().hex[:12]}"


def synced(world: World, sink: Recorder | None = None, cursor: str | None = None) -> tuple[Recorder, SyncEnd]:
    sink = sink or Recorder()
    return sink, world.connector.sync(world.ctx, world.source, cursor, sink)


def holding(sink: Recorder, word: str) -> list[str]:
    """The named documents whose bytes hold ``word``."""
    return [id for id, data in sink.documents.items() if word.encode() in data]


class SourceContract:
    @pytest.fixture
    def world(self) -> Any:
        raise NotImplementedError("a connector's test class gives its world")

    def test_the_source_passes_its_own_validation(self, world):
        world.connector.validate(world.ctx, world.source)
        assert world.connector.type == world.source.type

    def test_each_document_is_named_once_with_its_content(self, world):
        a, b = token(), token()
        world.put("a.md", f"# A\n\nAlpha {a}.\n")
        world.put("b.md", f"# B\n\nBeta {b}.\n")
        sink, ended = synced(world)
        assert ended.complete and not sink.errors
        assert len(sink.named) == len(set(sink.named))  # once each
        assert len(holding(sink, a)) == 1 and len(holding(sink, b)) == 1 and holding(sink, a) != holding(sink, b)

    def test_a_changed_document_keeps_its_id(self, world):
        before, after = token(), token()
        world.put("a.md", f"# A\n\nAlpha {before}.\n")
        first, _ = synced(world)
        world.put("a.md", f"# A\n\nAlpha changed {after}.\n")
        second, ended = synced(world)
        assert ended.complete
        assert holding(second, after) == holding(first, before) and holding(second, before) == []

    def test_a_removed_document_is_named_no_more_or_said_deleted(self, world):
        a, b = token(), token()
        world.put("a.md", f"# A\n\nAlpha {a}.\n")
        world.put("b.md", f"# B\n\nBeta {b}.\n")
        first, _ = synced(world)
        (gone,) = holding(first, b)
        world.remove("b.md")
        second, ended = synced(world)
        assert holding(second, b) == [] and holding(second, a) == holding(first, a)
        assert (ended.complete and gone not in second.named) or gone in second.deleted_ids  # by absence, or by a delete

    def test_a_sink_that_says_stop_is_told_no_more_and_nothing_is_concluded(self, world):
        for name in ("a.md", "b.md", "c.md"):
            world.put(name, f"# {name}\n\nText {token()}.\n")
        sink, ended = synced(world, Recorder(stop_after=1))
        assert len(sink.named) == 1 and not ended.complete

    def test_a_document_fetched_alone_reads_as_listed(self, world):
        a = token()
        world.put("a.md", f"# A\n\nAlpha {a}.\n")
        sink, _ = synced(world)
        (id,) = holding(sink, a)
        alone = world.connector.one(world.ctx, world.source, id, sink.items[id].name)
        assert alone.document_id == id and alone.fetch()[0] == sink.documents[id]

    def test_from_its_cursor_a_sync_names_what_changed_and_deletes_what_went(self, world):
        """A connector that keeps a cursor resumes from it: the changed document named, the removed one said deleted,
        the untouched one not read again (said unchanged, or left out of a sync that is then not complete). One that
        keeps none lists in full every time."""
        a, b, c, changed = token(), token(), token(), token()
        for name, word in (("a.md", a), ("b.md", b), ("c.md", c)):
            world.put(name, f"# {name}\n\nText {word}.\n")
        first, ended = synced(world)
        world.put("a.md", f"# a.md\n\nChanged {changed}.\n")
        world.remove("b.md")
        second, delta = synced(world, cursor=ended.cursor)
        if ended.cursor is None:
            assert delta.complete and holding(second, c) == holding(first, c) and holding(second, b) == []
            return
        assert delta.cursor not in (None, ended.cursor)
        assert holding(second, changed) == holding(first, a) and holding(second, c) == []
        assert holding(first, c)[0] in second.unchanged_ids or not delta.complete
        assert second.deleted_ids == holding(first, b)
        quiet, after = synced(world, cursor=delta.cursor)  # nothing changed since
        assert quiet.named == [] and quiet.deleted_ids == [] and after.cursor == delta.cursor
