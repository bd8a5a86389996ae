"""Reading a page over HTTP (through the outbound guard's client) and the page URLs of a sitemap (a urlset or
sitemap index, RSS or Atom, a plain list; gzipped or not; within the sitemap protocol's bounds)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable
from urllib.parse import urlsplit

import httpx

from eddi_rag.common.outbound import OutboundPolicy

USER_AGENT = "eddi-rag"
MAX_PAGE_BYTES = 20 * 1024 * 1024
MAX_SITEMAP_BYTES = 50 * 1024 * 1024  # a sitemap file, uncompressed (the sitemap protocol's bound)
MAX_SITEMAP_URLS = 50_000  # URLs one sitemap file may list (the protocol's bound)


class PageGoneError(ValueError):
    """The server says the page is not there (404, 410): a definite answer, unlike a 5xx or a timeout."""


def same_site(url: str, start: str, subdomains: bool = False) -> bool:
    a, b = urlsplit(url), urlsplit(start)
    if (a.scheme, a.port) != (b.scheme, b.port) or not a.hostname or not b.hostname:
        return False
    return a.hostname == b.hostname or (subdomains and a.hostname.endswith("." + b.hostname))


def fetch(client: httpx.Client, url: str, user_agent: str = USER_AGENT, max_bytes: int = MAX_PAGE_BYTES,
          timeout: float | None = None) -> tuple[bytes, str | None]:
    """The body and Content-Type of a 2xx answer; raises on anything else (PageGoneError: 404, 410)."""
    kwargs = {} if timeout is None else {"timeout": timeout}
    with client.stream("GET", url, headers={"User-Agent": user_agent}, **kwargs) as response:  # type: ignore[arg-type]
        if response.status_code in (404, 410):
            raise PageGoneError(f"HTTP {response.status_code}")
        if response.status_code >= 400:
            raise ValueError(f"HTTP {response.status_code}")
        data = bytearray()
        for piece in response.iter_bytes():
            data += piece
            if len(data) > max_bytes:
                raise ValueError(f"larger than {max_bytes} bytes")
        return bytes(data), response.headers.get("content-type")


def gunzipped(data: bytes, limit: int = MAX_SITEMAP_BYTES) -> bytes:
    """``data``, inflated when it is gzip (a ``sitemap.xml.gz``), at most ``limit`` bytes of it (ValueError past it)."""
    if data[:2] != b"\x1f\x8b":
        return data
    inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflate.decompress(data, limit + 1)
    except zlib.error as e:
        raise ValueError(f"not a sitemap: a broken gzip file ({e})") from e
    if len(out) > limit or inflate.unconsumed_tail:
        raise ValueError(f"a gzipped sitemap that unpacks to more than {limit:,} bytes (the sitemap protocol's bound)")
    return out


def _name(element: ET.Element) -> str:
    return element.tag.rsplit("}", 1)[-1]


def locs(data: bytes) -> tuple[str, list[str]]:
    """(its kind, the page or sitemap URLs it lists) of what a sitemap URL answered, as the sitemap protocol and EDDI
    read them: a ``urlset`` or ``sitemapindex`` (``<loc>``), an RSS 2.0 feed (its items' ``<link>``), an Atom feed
    (its entries' ``<link href>``), a plain-text list (a URL a line), each possibly gzipped; at most
    MAX_SITEMAP_URLS of them (the protocol's bound on a file). ValueError for anything else."""
    data = gunzipped(data)
    if not data.lstrip()[:1] == b"<":
        text = data.decode("utf-8", "replace").lstrip("\ufeff")
        found = [line.strip() for line in text.splitlines() if line.strip().startswith(("http://", "https://"))]
        if not found:
            raise ValueError("not a sitemap: neither XML nor a list of URLs")
        return "text", found[:MAX_SITEMAP_URLS]
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        raise ValueError(f"not a sitemap: {e}") from e
    kind = _name(root)
    if kind in ("urlset", "sitemapindex"):
        found = [el.text.strip() for el in root.iter() if _name(el) == "loc" and el.text]
    elif kind == "rss":
        found = [link.text.strip() for item in root.iter() if _name(item) == "item"
                 for link in item if _name(link) == "link" and link.text]
    elif kind == "feed":
        found = [str(link.get("href")).strip() for entry in root.iter() if _name(entry) == "entry"
                 for link in entry if _name(link) == "link" and link.get("href") and link.get("rel", "alternate") == "alternate"]
    else:
        raise ValueError(f"not a sitemap: the root element is <{kind}>")
    return kind, found[:MAX_SITEMAP_URLS]


def page(outbound: OutboundPolicy, url: str, max_bytes: int = MAX_PAGE_BYTES) -> Callable[[], tuple[bytes, str | None]]:
    """The fetch of one page, through the outbound guard's client, carried out when called."""
    def read() -> tuple[bytes, str | None]:
        with outbound.client() as client:
            return fetch(client, url, max_bytes=max_bytes)
    return read
