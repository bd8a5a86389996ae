"""A website: a breadth-first crawl from ``startUrl`` as EDDI's ``web`` block describes it. In scope: the
start page's site (same scheme, host and port; its subdomains with ``includeSubdomains``; anywhere with
``sameSiteOnly`` off), paths under ``pathPrefix``, no ``excludePatterns`` match. Pages are found by links
(``maxDepth`` deep) and by sitemaps (``sitemapUrls``, robots.txt's ``Sitemap:`` lines, else
``/sitemap.xml``; their pages at depth 0), at most ``maxPages``, ``requestDelayMs`` apart (a slower
``Crawl-delay`` wins), honouring robots.txt when asked. Every page of a supported type is a document
named by its URL. Every request goes through the outbound guard. A page answering 404 or 410 is gone;
the listing is complete only when every other page was read and no limit was reached."""

from __future__ import annotations

import time
import urllib.robotparser
from collections import deque
from typing import Annotated
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx
from pydantic import Field

from eddi_rag.common.outbound import OutboundBlockedError
from eddi_rag.config import IngestionSource
from eddi_rag.sources.base import (
    Connector,
    Globs,
    Item,
    Listing,
    Settings,
    Sink,
    SourceContext,
    SyncEnd,
    feed,
    outbound,
    path_glob,
    selected,
)
from eddi_rag.sources.fetching import MAX_PAGE_BYTES, USER_AGENT, PageGoneError, fetch, locs, page, same_site

MAX_SITEMAPS = 20  # sitemaps read per crawl, indexes included (EDDI's bound)
MAX_SITEMAP_PAGES = 5000


class WebSettings(Settings):
    """A crawl of one site from a start page (EDDI's web block; include, exclude and respectRobotsTxt are our older
    spellings)."""

    startUrl: str = outbound()
    maxDepth: int = Field(3, ge=0, le=20)
    maxPages: int = Field(200, ge=1, le=50000)
    respectRobotsTxt: bool = Field(True, description="The older spelling of respectRobots.")
    include: Globs = Field(default_factory=list, description="Globs on the URL path; empty: every page of the site.")
    exclude: Globs = Field(default_factory=list)
    sameSiteOnly: bool = Field(True, description="Stay on the start page's site (scheme, host and port).")
    includeSubdomains: bool = Field(False, description="Count subdomains of the start page's host as the same site.")
    pathPrefix: str = Field("/", description="Only pages whose path starts with this are crawled and ingested.")
    excludePatterns: Globs = Field(default_factory=list, max_length=100, description=
        "Globs on the URL path: * stays inside one segment, ** crosses them, ? is one character; a pattern "
        "not starting with / or ** matches at any depth (*.pdf).")
    sitemapUrls: list[Annotated[str, Field(pattern=r"^https?://")]] = Field(default_factory=list, max_length=20, description=
        "Sitemaps whose pages seed the crawl, besides those robots.txt names (and /sitemap.xml when neither "
        "gives any).")
    requestDelayMs: int = Field(500, ge=0, le=60000, description="Pause between two requests of a crawl; a slower Crawl-delay in robots.txt wins.")
    timeoutSeconds: int = Field(15, ge=1, le=300, description="Per-request timeout.")
    userAgent: str | None = Field(None, max_length=300, description="Sent with every request and matched against robots.txt; default eddi-rag.")
    respectRobots: bool = Field(True, description="Honour robots.txt: its rules, Crawl-delay and Sitemap lines.")

    @property
    def robots(self) -> bool:
        return self.respectRobots and self.respectRobotsTxt



def robots(client: httpx.Client, start: str, user_agent: str = USER_AGENT) -> urllib.robotparser.RobotFileParser | None:
    parts = urlsplit(start)
    parser = urllib.robotparser.RobotFileParser()
    try:
        data, _ = fetch(client, f"{parts.scheme}://{parts.netloc}/robots.txt", user_agent)
    except (ValueError, httpx.HTTPError, OutboundBlockedError):
        return None  # no robots.txt: everything is allowed
    parser.parse(data.decode("utf-8", errors="replace").splitlines())
    return parser


def links(html: bytes, base: str) -> list[str]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    return [urldefrag(urljoin(base, str(a["href"]).strip()))[0] for a in soup.find_all("a", href=True)]


def _cached(data: bytes, content_type: str | None):
    return lambda: (data, content_type)


class Crawl:
    """One crawl of ``spec``: what is in scope, the pause between requests, the sitemaps."""

    def __init__(self, spec: WebSettings, client: httpx.Client, max_bytes: int, deadline: float | None):
        self.spec, self.client, self.max_bytes, self.deadline = spec, client, max_bytes, deadline
        self.start = urldefrag(spec.startUrl)[0]
        self.agent = spec.userAgent or USER_AGENT
        self.rules = robots(client, self.start, self.agent) if spec.robots else None
        delay = self.rules.crawl_delay(self.agent) if self.rules is not None else None
        self.pause = max(spec.requestDelayMs / 1000, float(delay or 0))
        self._last = 0.0

    def get(self, url: str) -> tuple[bytes, str | None]:
        wait = self._last + self.pause - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            return fetch(self.client, url, self.agent, self.max_bytes, self.spec.timeoutSeconds)
        finally:
            self._last = time.monotonic()

    def in_scope(self, url: str) -> bool:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            return False
        if self.spec.sameSiteOnly and not same_site(url, self.start, self.spec.includeSubdomains):
            return False
        path = parts.path or "/"
        return path.startswith(self.spec.pathPrefix or "/") and not any(path_glob(path, p) for p in self.spec.excludePatterns)

    def allowed(self, url: str) -> bool:
        return self.rules is None or self.rules.can_fetch(self.agent, url)

    def sitemap_pages(self, out: Listing) -> list[str]:
        """The page URLs of the configured sitemaps, robots.txt's, else /sitemap.xml (indexes followed on their
        own host); a sitemap that could not be read (but 404) makes the listing incomplete."""
        parts = urlsplit(self.start)
        todo = list(self.spec.sitemapUrls) + (list(self.rules.site_maps() or []) if self.rules is not None else [])
        guessed = not todo
        todo = todo or [f"{parts.scheme}://{parts.netloc}/sitemap.xml"]
        pages: list[str] = []
        read = 0
        while todo and read < MAX_SITEMAPS and len(pages) < MAX_SITEMAP_PAGES:
            url = todo.pop(0)
            read += 1
            try:
                kind, found = locs(self.get(url)[0])
            except PageGoneError:
                continue
            except (ValueError, httpx.HTTPError, OutboundBlockedError) as e:
                if not guessed:
                    out.failures.append({"document": url, "reason": str(e) or type(e).__name__})
                    out.complete = False
                continue
            if kind == "sitemapindex":
                todo += [u for u in found if same_site(u, url)]
            else:
                pages += found
        if todo or len(pages) >= MAX_SITEMAP_PAGES:
            out.complete = False
            out.notes.append(f"sitemaps past {MAX_SITEMAPS} files or {MAX_SITEMAP_PAGES} pages were not read")
        return pages[:MAX_SITEMAP_PAGES]


def listing(source_id: str, spec: WebSettings, client: httpx.Client, max_bytes: int = MAX_PAGE_BYTES,
            deadline: float | None = None) -> Listing:
    """``deadline`` (time.monotonic): past it the crawl stops, incomplete."""
    crawl = Crawl(spec, client, max_bytes, deadline)
    out = Listing()
    seen, queue = {crawl.start}, deque([(crawl.start, 0)])
    for url in crawl.sitemap_pages(out):
        url = urldefrag(url)[0]
        if url not in seen and crawl.in_scope(url):
            seen.add(url)
            queue.append((url, 0))
    while queue:
        url, depth = queue.popleft()
        if not crawl.allowed(url):
            continue
        if len(out.items) >= spec.maxPages:
            out.stop(f"maxPages ({spec.maxPages}) reached")
            break
        if deadline is not None and time.monotonic() > deadline:
            out.stop("timeBudgetMinutes reached while crawling")
            break
        try:
            data, content_type = crawl.get(url)
        except PageGoneError:
            continue  # gone: it is not listed, and the listing can still be complete
        except (ValueError, httpx.HTTPError, OutboundBlockedError) as e:
            out.failures.append({"document": url, "reason": str(e) or type(e).__name__})
            out.complete = False
            continue
        path = urlsplit(url).path or "/"
        if crawl.in_scope(url) and selected(path, spec.include, spec.exclude):
            out.items.append(Item(url, url, _cached(data, content_type)))
        if depth < spec.maxDepth and "html" in (content_type or "").lower():
            for link in links(data, url):
                if link not in seen and crawl.in_scope(link):
                    seen.add(link)
                    queue.append((link, depth + 1))
    if out.failures:
        out.notes.append(f"{len(out.failures)} page(s) could not be fetched")
    return out


class WebConnector(Connector[WebSettings]):
    type = "web"
    configuration = WebSettings
    needs = "a start page the server may reach"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"website {spec.startUrl}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        pass  # the schema checks the URL; the outbound guard checks each request

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        page(ctx.outbound, self.spec(source).startUrl, source.settings.maxBytesPerPage)()  # the start page answers 2xx

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        ctx.outbound.check(self.spec(source).startUrl)  # a start page the guard refuses: the run fails, saying so (not 0 documents)
        with ctx.outbound.client() as client:
            return feed(listing(source.effective_id, self.spec(source), client, source.settings.maxBytesPerPage, ctx.deadline), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        return Item(document_id, name, page(ctx.outbound, document_id, source.settings.maxBytesPerPage))


CONNECTOR = WebConnector()
