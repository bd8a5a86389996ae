"""A fake of Google's Drive API v3 (and the Admin SDK's group members) on 127.0.0.1, speaking the JSON of their
documentation for what the gdrive connector asks: a service account's token (``POST /token``, a JWT bearer assertion
verified against the key the fake made, RFC 7523), ``changes.getStartPageToken``, ``files.list`` (``nextPageToken``
paging), a file's media and a Google Doc's export, ``permissions.list``, ``changes.list`` (``newStartPageToken`` on its
last page; a token it never issued: 400 ``invalid``), and ``members.list``. ``throttle[path prefix] = n`` answers the
next n requests there with 429 and ``Retry-After: 1``. ``key`` is the service account's JSON key to configure."""

from __future__ import annotations

import json
import secrets
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.fake_service import FakeService

EMAIL = "rag-reader@acme-project.iam.gserviceaccount.com"
DOC = "application/vnd.google-apps.document"


class FakeDrive(FakeService):
    def __init__(self, page_size: int = 50):
        super().__init__()
        import jwt  # noqa: F401 - (the fake verifies assertions with it)
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa

        self.page_size, self.seq = page_size, 1
        self.files: dict[str, dict[str, Any]] = {}
        self.groups: dict[str, list[str]] = {}
        self.tokens: set[str] = set()
        self.rejected: set[str] = set()  # change tokens Drive no longer takes
        self._lock = threading.Lock()
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.public = private.public_key()
        self.pem = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                         serialization.NoEncryption()).decode()
        self.throttled = _error(429, "rateLimitExceeded", "Rate Limit Exceeded")

    @property
    def key(self) -> str:
        return json.dumps({"type": "service_account", "project_id": "acme-project", "private_key_id": "k1",
                           "private_key": self.pem, "client_email": EMAIL, "token_uri": f"{self.url}/token"})

    # -- the test's side -------------------------------------------------------------------------
    def put(self, name: str, data: bytes, mime: str = "text/markdown", permissions: list[dict[str, Any]] | None = None) -> str:
        with self._lock:
            self.seq += 1
            found = next((f for f in self.files.values() if f["name"] == name and not f["trashed"]), None)
            entry = found or {"id": secrets.token_urlsafe(12), "name": name, "trashed": False, "version": 0, "permissions": []}
            entry.update(data=data, mimeType=mime, seq=self.seq, version=entry["version"] + 1)
            if permissions is not None:
                entry["permissions"] = permissions
            self.files[entry["id"]] = entry
            return entry["id"]

    def trash(self, name: str) -> None:
        with self._lock:
            self.seq += 1
            entry = next(f for f in self.files.values() if f["name"] == name and not f["trashed"])
            entry.update(trashed=True, seq=self.seq)

    def share(self, name: str, permissions: list[dict[str, Any]]) -> None:
        next(f for f in self.files.values() if f["name"] == name and not f["trashed"])["permissions"] = permissions

    # -- Google's side ---------------------------------------------------------------------------
    def answer(self, h: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, str]) -> None:
        import jwt

        if method == "POST" and path == "/token":
            form = self.form(h)
            try:
                claims = jwt.decode(form.get("assertion", ""), self.public, algorithms=["RS256"], audience=f"{self.url}/token")
                assert claims["iss"] == EMAIL and form.get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer"
            except Exception:  # noqa: BLE001 - any bad assertion: Google's answer
                return self.send(h, 400, {"error": "invalid_grant", "error_description": "Invalid JWT Signature."})
            token = secrets.token_hex(16)
            self.tokens.add(token)
            return self.send(h, 200, {"access_token": token, "expires_in": 3599, "token_type": "Bearer"})
        if h.headers.get("Authorization", "").removeprefix("Bearer ") not in self.tokens:
            return self.send(h, 401, _error(401, "authError", "Invalid Credentials"))
        if path.startswith("/admin/directory/v1/groups/"):
            group = path.split("/")[5]
            return self.send(h, 200, {"kind": "admin#directory#members", "members": [
                {"kind": "admin#directory#member", "email": u, "role": "MEMBER", "type": "USER", "status": "ACTIVE"}
                for u in self.groups.get(group, [])]})
        if path == "/drive/v3/changes/startPageToken":
            return self.send(h, 200, {"kind": "drive#startPageToken", "startPageToken": str(self.seq)})
        if path == "/drive/v3/changes":
            return self._changes(h, query)
        if path == "/drive/v3/files":
            live = sorted((f for f in self.files.values() if not f["trashed"]), key=lambda f: f["seq"])
            return self._page(h, "drive#fileList", "files", [self._file(f) for f in live], query)
        segments = path.removeprefix("/drive/v3/files/").split("/")
        entry = self.files.get(segments[0])
        if entry is None or entry["trashed"]:
            return self.send(h, 404, _error(404, "notFound", f"File not found: {segments[0]}."))
        if segments[1:] == ["permissions"]:
            return self.send(h, 200, {"kind": "drive#permissionList", "permissions": [
                {"kind": "drive#permission", "id": f"p{n}", "role": "reader", **p} for n, p in enumerate(entry["permissions"])]})
        if segments[1:] == ["export"]:
            if entry["mimeType"] != DOC:
                return self.send(h, 403, _error(403, "fileNotExportable", "Export only supports Docs Editors files."))
            return self.send(h, 200, entry["data"], {"Content-Type": query.get("mimeType", "text/html")})
        if query.get("alt") == "media":
            if entry["mimeType"] == DOC:
                return self.send(h, 403, _error(403, "fileNotDownloadable",
                                                 "Only files with binary content can be downloaded. Use Export with Docs Editors files."))
            return self.send(h, 200, entry["data"], {"Content-Type": entry["mimeType"]})
        return self.send(h, 200, self._file(entry))

    def _changes(self, h: BaseHTTPRequestHandler, query: dict[str, str]) -> None:
        token = query.get("pageToken", "")
        since, _, offset = token.partition(".")
        if not since.isdigit() or int(since) > self.seq or token in self.rejected:
            return self.send(h, 400, _error(400, "invalid", "Invalid Value", location="pageToken"))
        changed = sorted((f for f in self.files.values() if f["seq"] > int(since)), key=lambda f: f["seq"])
        entries = [{"kind": "drive#change", "changeType": "file", "fileId": f["id"], "removed": False, "time": "2026-11-27T10:00:00Z",
                    "file": self._file(f)} for f in changed]
        start = int(offset or 0)
        body: dict[str, Any] = {"kind": "drive#changeList", "changes": entries[start:start + self.page_size]}
        if start + self.page_size < len(entries):
            body["nextPageToken"] = f"{since}.{start + self.page_size}"
        else:
            body["newStartPageToken"] = str(max([int(since), *(f["seq"] for f in changed)]))
        return self.send(h, 200, body)

    def _page(self, h: BaseHTTPRequestHandler, kind: str, key: str, entries: list[dict[str, Any]], query: dict[str, str]) -> None:
        start = int(query.get("pageToken") or 0)
        body: dict[str, Any] = {"kind": kind, key: entries[start:start + self.page_size]}
        if start + self.page_size < len(entries):
            body["nextPageToken"] = str(start + self.page_size)
        return self.send(h, 200, body)

    def _file(self, f: dict[str, Any]) -> dict[str, Any]:
        out = {"kind": "drive#file", "id": f["id"], "name": f["name"], "mimeType": f["mimeType"], "version": str(f["version"]),
               "webViewLink": f"https://drive.google.com/file/d/{f['id']}/view", "modifiedTime": "2026-11-27T10:00:00.000Z",
               "trashed": f["trashed"]}
        if f["mimeType"] != DOC:
            out["size"] = str(len(f["data"]))
        return out


def _error(code: int, reason: str, message: str, location: str | None = None) -> dict[str, Any]:
    error = {"domain": "global", "reason": reason, "message": message,
             **({"locationType": "parameter", "location": location} if location else {})}
    return {"error": {"code": code, "message": message, "errors": [error]}}
