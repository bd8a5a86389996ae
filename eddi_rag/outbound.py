"""One guard for every request the server makes on a caller's behalf (web sources, sitemaps,
httpCall RAG): link-local and cloud-metadata addresses never; private ranges, loopback and
carrier-grade NAT only inside networks the server's configuration allows
(``EDDI_RAG_OUTBOUND_ALLOW``, e.g. ``127.0.0.0/8,10.1.0.0/16``; default none). Every redirect hop
is checked again. Only http and https."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from eddi_rag.errors import EddiRagError

Network = ipaddress.IPv4Network | ipaddress.IPv6Network
NEVER = tuple(ipaddress.ip_network(n) for n in (
    "169.254.0.0/16", "fe80::/10",  # link-local, where cloud metadata services live
    "100.100.100.200/32", "fd00:ec2::254/128",  # Alibaba's and AWS's IPv6 metadata addresses
    "0.0.0.0/8", "::/128", "224.0.0.0/4", "ff00::/8", "240.0.0.0/4",  # unspecified, multicast, reserved
))
METADATA_HOSTS = {"metadata.google.internal", "metadata", "instance-data", "metadata.azure.internal"}
GUARDED = tuple(ipaddress.ip_network(n) for n in ("100.64.0.0/10",))  # carrier-grade NAT: private in practice


class OutboundBlockedError(EddiRagError, ValueError):
    """A request to an address the server may not reach."""
    status = 400


def _allowed_from_env() -> tuple[Network, ...]:
    raw = os.environ.get("EDDI_RAG_OUTBOUND_ALLOW", "")
    try:
        return tuple(ipaddress.ip_network(part.strip(), strict=False) for part in raw.split(",") if part.strip())
    except ValueError as e:
        raise ValueError(f"EDDI_RAG_OUTBOUND_ALLOW: {e}") from None


@dataclass(frozen=True)
class OutboundPolicy:
    allow: tuple[Network, ...] = ()  # private/loopback networks that may be reached

    @classmethod
    def from_env(cls) -> OutboundPolicy:
        return cls(_allowed_from_env())

    @staticmethod
    def check_static(url: str) -> str:
        """What can be refused without resolving the host (a URL being saved): not http(s), no host,
        a cloud metadata name, a literal link-local or metadata address. Returns the host."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise OutboundBlockedError(f"{url}: only http and https URLs may be fetched")
        host = (parts.hostname or "").rstrip(".").lower()
        if not host:
            raise OutboundBlockedError(f"{url}: no host")
        if host in METADATA_HOSTS:
            raise OutboundBlockedError(f"{url}: {host} is a cloud metadata service")
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            return host
        if any(literal in n for n in NEVER):
            raise OutboundBlockedError(f"{url}: {host} is a link-local or metadata address (never allowed)")
        return host

    def check(self, url: str) -> None:
        """Raise OutboundBlockedError unless ``url`` may be requested (its host is resolved here)."""
        parts = urlsplit(url)
        host = self.check_static(url)
        try:
            infos = socket.getaddrinfo(host, parts.port or (443 if parts.scheme == "https" else 80), type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise OutboundBlockedError(f"{url}: cannot resolve {host} ({e.strerror})") from e
        for info in infos:
            ip = ipaddress.ip_address(str(info[4][0]).split("%")[0])
            if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
                ip = ip.ipv4_mapped
            if any(ip in n for n in NEVER):
                raise OutboundBlockedError(f"{url}: {host} resolves to {ip}, a link-local or metadata address (never allowed)")
            private = ip.is_private or ip.is_loopback or any(ip in n for n in GUARDED)
            if private and not any(ip in n for n in self.allow if n.version == ip.version):
                raise OutboundBlockedError(
                    f"{url}: {host} resolves to {ip}, a private or loopback address; allow its network in "
                    f"EDDI_RAG_OUTBOUND_ALLOW to reach it")

    def client(self, **kwargs: Any) -> httpx.Client:
        """An httpx client that checks every request it sends, redirects included (at most 5)."""
        def hook(request: httpx.Request) -> None:
            self.check(str(request.url))

        kwargs.setdefault("timeout", 15)
        kwargs.setdefault("follow_redirects", True)
        kwargs.setdefault("max_redirects", 5)
        return httpx.Client(event_hooks={"request": [hook]}, **kwargs)
