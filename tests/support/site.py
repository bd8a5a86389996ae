"""A small website on 127.0.0.1 whose pages the test changes between runs: ``pages`` maps a path
to (Content-Type, body); ``statuses`` maps a path to the error it answers; anything else is a 404.
Requests are recorded."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Site:
    def __init__(self, pages: dict[str, tuple[str, bytes]] | None = None):
        self.pages = dict(pages or {})
        self.statuses: dict[str, int] = {}
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                outer.requests.append(self.path)
                found = outer.pages.get(self.path.split("?")[0])
                status, (ctype, body) = (200, found) if found else (404, ("text/plain", b"not found"))
                if self.path.split("?")[0] in outer.statuses:
                    status, (ctype, body) = outer.statuses[self.path.split("?")[0]], ("text/plain", b"error")
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def html(self, path: str, title: str, body: str, links: list[str] = ()) -> None:
        anchors = "".join(f'<a href="{link}">{link}</a> ' for link in links)
        page = f"<html><head><title>{title}</title></head><body><nav>{anchors}</nav><main><h1>{title}</h1>{body}</main></body></html>"
        self.pages[path] = ("text/html; charset=utf-8", page.encode())

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
