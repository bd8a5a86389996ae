"""One guard for every request the server makes on a caller's behalf (web sources, sitemaps,
httpCall RAG, embedding and reranker endpoints, store servers): link-local and cloud-metadata addresses
never; private ranges, loopback and carrier-grade NAT only inside networks the server's configuration
allows (``EDDI_RAG_OUTBOUND_ALLOW``, e.g. ``127.0.0.0/8,10.1.0.0/16``; default none; an entry starting
with ``/`` allows the local sockets in that folder, for a store server reached through one). Every redirect
hop is checked again. Only http and https for requests. Addresses written as one number
(``http://2852039166/``) or as IPv4 inside IPv6 (``[::ffff:169.254.169.254]``) are read as the address
they are."""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import socket
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from eddi_rag.common.secrets import ENDPOINT_PARAMETERS
from eddi_rag.errors import CONFIGURATION, EddiRagError

if TYPE_CHECKING:
    import httpx

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
    failure = CONFIGURATION  # the endpoint, or the operator's EDDI_RAG_OUTBOUND_ALLOW


def _allowed_from_env() -> tuple[tuple[Network, ...], tuple[str, ...]]:
    parts = [p.strip() for p in os.environ.get("EDDI_RAG_OUTBOUND_ALLOW", "").split(",") if p.strip()]
    try:
        networks = tuple(ipaddress.ip_network(p, strict=False) for p in parts if not p.startswith("/"))
    except ValueError as e:
        raise ValueError(f"EDDI_RAG_OUTBOUND_ALLOW: {e}") from None
    return networks, tuple(os.path.normpath(p) for p in parts if p.startswith("/"))


def literal_address(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host names literally, however written (dotted, one number, hex, IPv4-mapped IPv6), else None."""
    host = host.strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        try:  # the forms inet_aton reads, as resolvers and browsers do: 2852039166, 0xa9fea9fe, 169.254.43518
            ip = ipaddress.ip_address(socket.inet_aton(host))
        except (OSError, ValueError):
            return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


class UnresolvableHostError(OutboundBlockedError):
    """A host name that does not resolve here (yet: a compose service name before its network exists). A save keeps
    the configuration and says so; a use fails naming the host."""


@dataclass(frozen=True)
class OutboundPolicy:
    allow: tuple[Network, ...] = ()  # private/loopback networks that may be reached
    sockets: tuple[str, ...] = ()  # folders whose local sockets a store may connect through

    @classmethod
    def from_env(cls) -> OutboundPolicy:
        return cls(*_allowed_from_env())

    def with_loopback(self) -> OutboundPolicy:
        """This policy, 127.0.0.1 allowed too (``serve --demo-notices``: the stand-in service there)."""
        return replace(self, allow=(*self.allow, ipaddress.ip_network("127.0.0.1/32")))

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
        check_host_static(host, url)
        return host

    def check(self, url: str) -> None:
        """Raise OutboundBlockedError unless ``url`` may be requested (its host is resolved here)."""
        parts = urlsplit(url)
        host = self.check_static(url)
        self._check_resolved(host, parts.port or (443 if parts.scheme == "https" else 80), url)

    def check_host(self, host: str, port: int | None = None, what: str | None = None) -> None:
        """Raise OutboundBlockedError unless ``host`` may be connected to (resolved here); a local socket's
        path only inside a folder ``EDDI_RAG_OUTBOUND_ALLOW`` lists."""
        what = what or host
        if host.startswith("/"):
            folder = os.path.normpath(host)
            if not any(folder == s or folder.startswith(s.rstrip("/") + "/") for s in self.sockets):
                raise OutboundBlockedError(f"{what}: the local socket folder {host} may be used only when the operator "
                                           "lists it in EDDI_RAG_OUTBOUND_ALLOW")
            return
        check_host_static(host, what)
        self._check_resolved(host, port, what)

    def _check_resolved(self, host: str, port: int | None, what: str) -> None:
        """The addresses ``host`` resolves to, each: never link-local or metadata, private only where allowed."""
        try:
            infos = socket.getaddrinfo(host.strip("[]"), port or 80, type=socket.SOCK_STREAM)
        except socket.gaierror as e:
            raise UnresolvableHostError(f"{what}: cannot resolve {host} ({e.strerror})") from e
        for info in infos:
            ip = literal_address(str(info[4][0]).split("%")[0])
            assert ip is not None  # (getaddrinfo answers addresses)
            if any(ip in n for n in NEVER):
                raise OutboundBlockedError(f"{what}: {host} resolves to {ip}, a link-local or metadata address (never allowed)")
            private = ip.is_private or ip.is_loopback or any(ip in n for n in GUARDED)
            if private and not any(ip in n for n in self.allow if n.version == ip.version):
                raise OutboundBlockedError(
                    f"{what}: {host} resolves to {ip}, a private or loopback address; allow its network in "
                    f"EDDI_RAG_OUTBOUND_ALLOW to reach it")

    def check_endpoints(self, params: dict[str, Any], resolved: dict[str, Any], what: str) -> None:
        """Every server ``resolved`` parameters name (``baseUrl``, ``url``, ``host``, a connection string), unless the
        operator set it (the unresolved value is an ``${env:…}`` reference)."""
        for key, value in resolved.items():
            if key not in ENDPOINT_PARAMETERS or not isinstance(value, str) or not value:
                continue
            raw = params.get(key)
            if isinstance(raw, str) and raw.startswith("${env:"):
                continue
            for host, port in endpoint_hosts(key, value, resolved):
                self.check_host(host, port, f"{what}: {key}")

    def client(self, **kwargs: Any) -> httpx.Client:
        """An httpx client that checks every request it sends, redirects included (at most 5)."""
        import httpx  # (at the first client: httpx is not on the path of a start)

        def hook(request: httpx.Request) -> None:
            self.check(str(request.url))

        kwargs.setdefault("timeout", 15)
        kwargs.setdefault("follow_redirects", True)
        kwargs.setdefault("max_redirects", 5)
        kwargs.setdefault("verify", tls_context())
        return httpx.Client(event_hooks={"request": [hook]}, **kwargs)


@functools.cache
def tls_context() -> Any:
    """httpx's default TLS context (certifi's roots, or SSL_CERT_FILE / SSL_CERT_DIR), made once a process and shared
    by every client: httpx makes it again for each client otherwise, 20-40 ms of CPU (a web or SaaS source makes one
    a page)."""
    import httpx

    return httpx.create_ssl_context()


def check_host_static(host: str, what: str) -> None:
    """Refuse what a host's name or literal address says without resolving it."""
    name = host.strip("[]").rstrip(".").lower()
    if name in METADATA_HOSTS:
        raise OutboundBlockedError(f"{what}: {name} is a cloud metadata service")
    literal = literal_address(name)
    if literal is not None and any(literal in n for n in NEVER):
        raise OutboundBlockedError(f"{what}: {host} is a link-local or metadata address (never allowed)")


def static_endpoint_errors(params: dict[str, Any], path: str) -> list[dict[str, Any]]:
    """The endpoints ``params`` name that a save refuses without resolving them (a cloud metadata name, a literal
    link-local or metadata address: what ``check_endpoints`` refuses whatever the operator allows), as {path, message,
    value} under ``path``. Any provider's or store's, EDDI's Vertex ``endpoint`` among them; a reference (``${…}``) is
    judged when it is resolved, at use."""
    out = []
    for key, value in params.items():
        if key not in ENDPOINT_PARAMETERS or not isinstance(value, str) or not value.strip() or "${" in value:
            continue
        try:
            for host, _ in endpoint_hosts(key, value.strip(), params):
                if not host.startswith("/"):  # (a local socket's folder: the operator's to allow, at use)
                    check_host_static(host, "the endpoint")
        except OutboundBlockedError as e:
            out.append({"path": f"{path}.{key}", "value": value, "message": str(e)})
    return out


def endpoint_hosts(key: str, value: str, params: dict[str, Any]) -> list[tuple[str, int | None]]:
    """(host, port) pairs a store or provider parameter names: a URL (several hosts, as MongoDB's), a libpq
    URI or ``key=value`` string (its ``host``, a socket folder included), or a bare host."""
    if key == "host":
        port = params.get("port")
        return [(value, int(port) if isinstance(port, int) or (isinstance(port, str) and port.isdigit()) else None)]
    if "://" not in value:
        if "=" in value:  # libpq's key=value form
            found: dict[str, str] = {m.group(1): m.group(2) for m in re.finditer(r"(\w+)\s*=\s*'?([^\s']*)'?", value)}
            return [(h, None) for h in (found.get("host") or found.get("hostaddr") or "localhost").split(",")]
        return [(value, None)]
    parts = urlsplit(value)
    query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
    if query.get("host"):  # libpq: ?host=/socket/folder
        return [(unquote(h), None) for h in query["host"].split(",")]
    hosts = []
    for item in parts.netloc.rsplit("@", 1)[-1].split(","):
        host, _, port = item.rpartition(":") if not item.endswith("]") else (item, "", "")
        host = host or item
        hosts.append((host, int(port) if port.isdigit() else None))
    return [(h, p) for h, p in hosts if h] or [("localhost", None)]
