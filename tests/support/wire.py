"""A local HTTP server for speaking a paid API's real wire format in tests.

Our code → the provider's real SDK → real HTTP → this server. ``handler(request)`` returns
``(status, json-able body)``; every request is recorded (method, path, lower-cased headers,
parsed JSON body) so tests can check exactly what went over the wire. ``fail_next`` lists
statuses to answer with first (to exercise retries).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

Handler = Callable[[dict[str, Any]], tuple[int, Any]]


def fake_vector(text: str, dimensions: int) -> list[float]:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dimensions).astype(np.float32)
    return (v / np.linalg.norm(v)).tolist()


class WireStandIn:
    def __init__(self, handler: Handler, headers: dict[str, str] | None = None):
        self.handler = handler
        self.headers = headers or {}  # sent with every response
        self.requests: list[dict[str, Any]] = []
        self.fail_next: list[int] = []
        outer = self

        class RequestHandler(BaseHTTPRequestHandler):
            def _handle(self):
                raw = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0))
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = raw.decode(errors="replace")
                request = {"method": self.command, "path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                           "json": body, "raw": raw.decode(errors="replace")}
                outer.requests.append(request)
                if outer.fail_next:
                    status, payload = outer.fail_next.pop(0), outer.error_body(request)
                else:
                    try:
                        status, payload = outer.handler(request)
                    except Exception as e:  # noqa: BLE001 - a stand-in bug: answer 500 and say what it was
                        import traceback

                        traceback.print_exc()
                        status, payload = 500, {"error": {"message": f"stand-in error: {e!r}"}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in outer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), RequestHandler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    def error_body(self, request: dict[str, Any]) -> Any:
        return {"error": {"message": "stand-in failure"}}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def calls(self, suffix: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["path"].split("?")[0].endswith(suffix)]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
