"""The JSON API of a cloud service a connector reads (Microsoft Graph, Google Drive, Confluence): every request through
the outbound guard's client, a bearer token from OAuth 2.0 client credentials (kept until shortly before it expires),
and throttling obeyed: a 429 or 503 is retried after the server's ``Retry-After`` (else an exponential wait), at most
ATTEMPTS times and never past the run's deadline (tenacity)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Protocol

import httpx
from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt

from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.errors import EddiRagError

log = logging.getLogger(__name__)

ATTEMPTS = 6  # tries of one request the service throttles
MAX_WAIT = 120.0  # seconds: a longer Retry-After is waited this long, then tried again
MAX_BODY = 20 * 1024 * 1024  # a JSON answer larger than this is refused


class ServiceError(EddiRagError, RuntimeError):
    """The service answered with an error (its status and what it said, never the credentials)."""
    status = 502

    def __init__(self, message: str, code: int | None = None):
        super().__init__(message)
        self.code = code
        self.fix = self.fix or _fix_of_status(code)


def _fix_of_status(code: int | None) -> str:
    """What fixes a service's refusal, by its HTTP status (None: it was not reached)."""
    if code is None:
        return ("make the service's address reachable from this server (the source's URL fields; a private address must be "
                "listed in EDDI_RAG_OUTBOUND_ALLOW)")
    if code in (400, 401):
        return ("correct the credentials the source names (its tenant, client or account id, and the secret stored in the "
                "vault under the key its secret field names)")
    if code == 403:
        return "give the source's app or account read access to what the source names (the permission the service says)"
    if code == 404:
        return "correct what the source names (its sites, drives, folders, repository or bucket): the service knows no such one"
    if code in (429, 503) or code >= 500:
        return "wait until the service answers again (it is throttled or down)"
    return "correct what the service's answer names in the source's settings"


class ServiceGoneError(ServiceError):
    """HTTP 410: what the request named (a delta token, a page token) is no longer known to the service."""


class Throttled(ServiceError):
    """The service asked to wait (429, 503): retried after ``retry_after`` seconds (None: an exponential wait)."""
    status = 503

    def __init__(self, code: int, retry_after: float | None):
        super().__init__(f"HTTP {code}", code)
        self.retry_after = retry_after


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:  # an HTTP date: not worth parsing, the exponential wait does
        return None


class ClientCredentials:
    """An OAuth 2.0 client-credentials grant (RFC 6749 §4.4) at ``token_url``: the access token, fetched again shortly
    before it expires."""

    def __init__(self, token_url: str, client_id: str, client_secret: str, scope: str):
        self.token_url, self.form = token_url, {"grant_type": "client_credentials", "client_id": client_id,
                                                "client_secret": client_secret, "scope": scope}
        self._token, self._until = "", 0.0

    def token(self, client: httpx.Client) -> str:
        if time.monotonic() < self._until:
            return self._token
        response = client.post(self.token_url, data=self.form)
        if response.status_code != 200:
            raise ServiceError(f"the token endpoint {self.token_url} refused the client credentials: HTTP "
                               f"{response.status_code} {_said(response)}", response.status_code)
        body = response.json()
        self._token = str(body["access_token"])
        self._until = time.monotonic() + max(0, int(body.get("expires_in", 3600)) - 60)
        return self._token


def _said(response: httpx.Response) -> str:
    """What an error answer says, briefly (OAuth's error_description, Graph's and Google's error.message)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:200]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("message") or error.get("code") or "")[:300]
    if isinstance(body, dict):
        return str(body.get("error_description") or body.get("message") or error or "")[:300]
    return ""


class BearerToken(Protocol):
    def token(self, client: httpx.Client) -> str:
        """An access token, fetched through ``client`` when the one kept has expired."""


class JsonApi:
    """One service, for one sync: ``get`` a JSON document, ``pages`` of a listing, ``download`` a file. Its client is
    kept open for the sync; a call after it is closed (a document fetched by a retry, a preview) opens a client of its
    own for that call, with the same token."""

    def __init__(self, outbound: OutboundPolicy, what: str, auth: BearerToken | Callable[[], dict[str, str]] | None = None,
                 deadline: float | None = None, attempts: int = ATTEMPTS):
        self.outbound, self.what, self.auth, self.deadline, self.attempts = outbound, what, auth, deadline, attempts
        self.client = outbound.client(timeout=30)
        self.waited = 0.0  # seconds spent obeying the service's throttling

    @contextmanager
    def _session(self) -> Iterator[httpx.Client]:
        if not self.client.is_closed:
            yield self.client
            return
        with self.outbound.client(timeout=30) as client:
            yield client

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> JsonApi:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _headers(self, client: httpx.Client) -> dict[str, str]:
        if self.auth is None:
            return {}
        if callable(self.auth):
            return self.auth()
        return {"Authorization": f"Bearer {self.auth.token(client)}"}

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        asked = getattr(exc, "retry_after", None)
        wait = min(MAX_WAIT, asked if asked is not None else 2.0 ** (state.attempt_number - 1))
        if self.deadline is not None:
            wait = max(0.0, min(wait, self.deadline - time.monotonic()))
        self.waited += wait
        log.info("%s throttled (%s): waiting %.1f s", self.what, exc, wait)
        return wait

    def _send(self, client: httpx.Client, method: str, url: str, stream: bool = False, **kwargs: Any) -> httpx.Response:
        def once() -> httpx.Response:
            request = client.build_request(method, url, headers=self._headers(client), **kwargs)
            response = client.send(request, stream=stream)
            if response.status_code in (429, 503):
                response.close()
                if self.deadline is not None and time.monotonic() >= self.deadline:
                    raise ServiceError(f"{self.what}: throttled (HTTP {response.status_code}) past the run's time budget",
                                       response.status_code)
                raise Throttled(response.status_code, _retry_after(response))
            return response

        try:
            return Retrying(stop=stop_after_attempt(self.attempts), wait=self._wait,
                            retry=retry_if_exception_type(Throttled), reraise=True)(once)
        except Throttled as e:
            raise ServiceError(f"{self.what}: still throttled (HTTP {e.code}) after {self.attempts} tries", e.code) from None
        except httpx.HTTPError as e:
            raise ServiceError(f"{self.what}: {type(e).__name__}: {e}") from None

    def get(self, url: str, params: dict[str, Any] | None = None) -> Any:
        with self._session() as client:
            response = self._send(client, "GET", url, params=params)
        if response.status_code == 410:
            raise ServiceGoneError(f"{self.what}: {_said(response) or 'gone'} (HTTP 410)", 410)
        if response.status_code >= 400:
            raise ServiceError(f"{self.what}: GET {url.split('?')[0]} answered HTTP {response.status_code} {_said(response)}",
                               response.status_code)
        if len(response.content) > MAX_BODY:
            raise ServiceError(f"{self.what}: an answer of {len(response.content):,} bytes, over {MAX_BODY:,}").fixed_by(
                "name less in one source (fewer sites, drives or folders): one answer of the service was too large to read")
        return response.json()

    def pages(self, url: str, params: dict[str, Any] | None = None, next_link: str = "@odata.nextLink") -> Iterator[Any]:
        """Each page of a listing that links its next page by URL (Graph's ``@odata.nextLink``)."""
        page = self.get(url, params)
        yield page
        while isinstance(page, dict) and page.get(next_link):
            page = self.get(page[next_link])
            yield page

    def download(self, url: str, max_bytes: int | None = None) -> tuple[bytes, str | None]:
        """A file's bytes and Content-Type (redirects followed through the guard; the token is not sent to another
        host), at most ``max_bytes``."""
        with self._session() as client:
            response = self._send(client, "GET", url, stream=True)
            try:
                if response.status_code >= 400:
                    response.read()
                    raise ServiceError(f"{self.what}: download answered HTTP {response.status_code} {_said(response)}",
                                       response.status_code)
                data = bytearray()
                for piece in response.iter_bytes():
                    data += piece
                    if max_bytes is not None and len(data) > max_bytes:
                        raise ServiceError(f"{self.what}: a file over the limit of {max_bytes:,} bytes (settings.maxBytesPerPage or "
                                       "EDDI_RAG_MAX_UPLOAD_MB)").fixed_by("raise settings.maxBytesPerPage (or EDDI_RAG_MAX_UPLOAD_MB), or exclude the file")
                return bytes(data), response.headers.get("content-type")
            finally:
                response.close()
