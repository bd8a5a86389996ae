"""Files uploaded to the source (EDDI's ``type: upload``): the server keeps them (``sources.files``) and every run
reads them all. Its limits are the source's ``upload`` block, which every source has (EDDI's shape)."""

from __future__ import annotations

from eddi_rag.config import IngestionSource
from eddi_rag.sources.base import Item, Sink, SourceContext, SyncEnd, feed, listed_again


class UploadConnector:
    type = "upload"
    configuration = None  # its limits are the ``upload`` block every source has
    needs = "files uploaded to it (the Documents page, POST …/files)"

    def where(self, source: IngestionSource) -> str:
        return "uploaded files"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        pass  # its limits are checked as files come

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        pass  # its files are in our database: none listed is none held

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        return feed(ctx.files.listing(ctx.kb_id, source.effective_id), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return listed_again(self, ctx, source, document_id, name)


CONNECTOR = UploadConnector()
