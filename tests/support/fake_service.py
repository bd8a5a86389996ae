"""What the fakes of cloud services (Graph, Drive, Confluence) share: an HTTP server on 127.0.0.1 that records each
request, answers ``throttle[path prefix] = n`` with n 429s carrying ``Retry-After: 1``, and hands the rest to the
fake's ``answer(handler, method, path, query)`` (``query``: each parameter's first value)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit


class FakeService:
    throttled: Any = {"error": {"code": 429, "message": "throttled"}}  # the body of a 429, in the service's own words

    def __init__(self) -> None:
        self.throttle: dict[str, int] = {}
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer._dispatch(self, "GET")

            def do_POST(self):
                outer._dispatch(self, "POST")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _dispatch(self, h: BaseHTTPRequestHandler, method: str) -> None:
        parts = urlsplit(h.path)
        path = unquote(parts.path)
        self.requests.append(f"{method} {h.path}")
        for prefix, n in list(self.throttle.items()):
            if path.startswith(prefix) and n > 0:
                self.throttle[prefix] = n - 1
                return self.send(h, 429, self.throttled, {"Retry-After": "1"})
        return self.answer(h, method, path, {k: v[0] for k, v in parse_qs(parts.query).items()})

    def answer(self, h: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, str]) -> None:
        raise NotImplementedError

    @staticmethod
    def form(h: BaseHTTPRequestHandler) -> dict[str, str]:
        """A POST's urlencoded form."""
        return {k: v[0] for k, v in parse_qs(h.rfile.read(int(h.headers.get("Content-Length") or 0)).decode()).items()}

    @staticmethod
    def send(h: BaseHTTPRequestHandler, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        headers = dict(headers or {})
        h.send_response(status)
        h.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
        for k, v in headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
