"""Reading a page over HTTP (through the outbound guard's client) and the page URLs of a sitemap."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from urllib.parse import urlsplit

import httpx

USER_AGENT = "eddi-rag"
MAX_PAGE_BYTES = 20 * 1024 * 1024


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


def locs(xml: bytes) -> tuple[str, list[str]]:
    """(root element name, the <loc> texts); raises ValueError for anything but a sitemap."""
    try:
        root = ET.fromstring(xml)
    except ET.ParseError as e:
        raise ValueError(f"not a sitemap: {e}") from e
    kind = root.tag.rsplit("}", 1)[-1]
    if kind not in ("urlset", "sitemapindex"):
        raise ValueError(f"not a sitemap: the root element is <{kind}>")
    return kind, [el.text.strip() for el in root.iter() if el.tag.rsplit("}", 1)[-1] == "loc" and el.text]
