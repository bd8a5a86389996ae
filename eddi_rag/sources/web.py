"""A website: a breadth-first, same-site crawl from ``startUrl`` (same scheme, host and port),
``maxDepth`` links deep and at most ``maxPages`` pages, honouring robots.txt when asked; every
page of a supported type is a document named by its URL. Every request goes through the outbound
guard. The listing is complete only when every page was fetched and no limit was reached."""

from __future__ import annotations

import urllib.robotparser
from collections import deque
from urllib.parse import urldefrag, urljoin, urlsplit

import httpx

from eddi_rag.config import WebSource
from eddi_rag.outbound import OutboundBlockedError
from eddi_rag.sources import Item, Listing, selected

USER_AGENT = "eddi-rag"
MAX_PAGE_BYTES = 20 * 1024 * 1024


def same_site(url: str, start: str) -> bool:
    a, b = urlsplit(url), urlsplit(start)
    return (a.scheme, a.hostname, a.port) == (b.scheme, b.hostname, b.port)


def fetch(client: httpx.Client, url: str) -> tuple[bytes, str | None]:
    """The body and Content-Type of a 2xx answer; raises on anything else."""
    with client.stream("GET", url, headers={"User-Agent": USER_AGENT}) as response:
        if response.status_code >= 400:
            raise ValueError(f"HTTP {response.status_code}")
        data = bytearray()
        for piece in response.iter_bytes():
            data += piece
            if len(data) > MAX_PAGE_BYTES:
                raise ValueError(f"larger than {MAX_PAGE_BYTES} bytes")
        return bytes(data), response.headers.get("content-type")


def robots(client: httpx.Client, start: str) -> urllib.robotparser.RobotFileParser | None:
    parts = urlsplit(start)
    parser = urllib.robotparser.RobotFileParser()
    try:
        data, _ = fetch(client, f"{parts.scheme}://{parts.netloc}/robots.txt")
    except (ValueError, httpx.HTTPError):
        return None  # no robots.txt: everything is allowed
    parser.parse(data.decode("utf-8", errors="replace").splitlines())
    return parser


def links(html: bytes, base: str) -> list[str]:
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    return [urldefrag(urljoin(base, str(a["href"]).strip()))[0] for a in soup.find_all("a", href=True)]


def _cached(data: bytes, content_type: str | None):
    return lambda: (data, content_type)


def listing(source_id: str, spec: WebSource, client: httpx.Client) -> Listing:
    start = urldefrag(spec.startUrl)[0]
    rules = robots(client, start) if spec.respectRobotsTxt else None
    out = Listing()
    seen, queue = {start}, deque([(start, 0)])
    while queue:
        url, depth = queue.popleft()
        if rules is not None and not rules.can_fetch(USER_AGENT, url):
            continue
        if len(out.items) >= spec.maxPages:
            out.complete = False
            out.notes.append(f"maxPages ({spec.maxPages}) reached")
            break
        try:
            data, content_type = fetch(client, url)
        except (ValueError, httpx.HTTPError, OutboundBlockedError) as e:
            out.failures.append({"document": url, "reason": str(e) or type(e).__name__})
            out.complete = False
            continue
        if selected(urlsplit(url).path or "/", spec.include, spec.exclude):
            out.items.append(Item(url, url, _cached(data, content_type)))
        if depth < spec.maxDepth and "html" in (content_type or "").lower():
            for link in links(data, url):
                if link not in seen and same_site(link, start):
                    seen.add(link)
                    queue.append((link, depth + 1))
    if out.failures:
        out.notes.append(f"{len(out.failures)} page(s) could not be fetched")
    return out
