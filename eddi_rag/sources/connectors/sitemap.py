"""A sitemap: the page URLs of a ``urlset`` (nested ``sitemapindex`` files followed, three levels
at most), on the sitemap's own site, selected by include/exclude globs on the URL path, at most
``maxPages``. Pages are fetched when the sync engine asks for them."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlsplit

import httpx
from pydantic import Field

from eddi_rag.common.outbound import OutboundBlockedError
from eddi_rag.config import IngestionSource
from eddi_rag.sources.base import Connector, Globs, Item, Listing, Settings, Sink, SourceContext, SyncEnd, feed, outbound, selected
from eddi_rag.sources.fetching import fetch, locs, page, same_site

MAX_NESTING = 3


class SitemapSettings(Settings):
    """The pages a sitemap (or a sitemap index) lists."""

    url: str = outbound()
    maxPages: int = Field(1000, ge=1, le=50000)
    include: Globs = Field(default_factory=list)
    exclude: Globs = Field(default_factory=list)



def listing(source_id: str, spec: SitemapSettings, client: httpx.Client,
            page: Callable[[str], Callable[[], tuple[bytes, str | None]]]) -> Listing:
    """``client`` reads the sitemaps now; ``page(url)`` gives the fetch of a page, called later."""
    out = Listing()
    pages: list[str] = []
    todo, level = [spec.url], 0
    while todo and level <= MAX_NESTING:
        nested: list[str] = []
        for url in todo:
            try:
                kind, found = locs(fetch(client, url)[0])
            except (ValueError, httpx.HTTPError, OutboundBlockedError) as e:
                out.failures.append({"document": url, "reason": str(e) or type(e).__name__})
                out.complete = False
                continue
            (nested if kind == "sitemapindex" else pages).extend(loc for loc in found if same_site(loc, spec.url))
        todo, level = nested, level + 1
    if todo:
        out.complete = False
        out.notes.append(f"sitemap indexes nested deeper than {MAX_NESTING} levels were not read")
    for url in dict.fromkeys(pages):
        if not selected(urlsplit(url).path or "/", spec.include, spec.exclude):
            continue
        if len(out.items) >= spec.maxPages:
            out.stop(f"maxPages ({spec.maxPages}) reached")
            break
        out.items.append(Item(url, url, page(url)))
    return out


class SitemapConnector(Connector[SitemapSettings]):
    type = "sitemap"
    configuration = SitemapSettings
    needs = "a sitemap's URL the server may reach"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"sitemap {spec.url}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        pass  # the schema checks the URL; the outbound guard checks each request

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        page(ctx.outbound, self.spec(source).url)()  # the sitemap answers 2xx

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        limit = source.settings.maxBytesPerPage
        ctx.outbound.check(self.spec(source).url)  # a sitemap the guard refuses: the run fails, saying so (not 0 documents)
        with ctx.outbound.client() as client:  # the sitemaps now; each page when the sink reads it
            return feed(listing(source.effective_id, self.spec(source), client, lambda url: page(ctx.outbound, url, limit)), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return Item(document_id, name, page(ctx.outbound, document_id, source.settings.maxBytesPerPage))


CONNECTOR = SitemapConnector()
