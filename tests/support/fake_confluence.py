"""A fake of Confluence Cloud's REST API on 127.0.0.1, speaking the JSON of its documentation for what the confluence
connector asks: v2 spaces by key, a space's permissions and pages (``_links.next`` cursors relative to the site), a
page with its storage-format body, a page's attachments and their download links; v1 read restrictions of a page.
HTTP Basic with the one account's e-mail and API token, else 401. ``throttle[path prefix] = n`` answers the next n
requests there with 429 and ``Retry-After: 1``."""

from __future__ import annotations

import base64
from http.server import BaseHTTPRequestHandler
from itertools import count
from typing import Any

from tests.support.fake_service import FakeService

EMAIL, TOKEN = "bot@acme.example", "atlassian-api-token"


class FakeConfluence(FakeService):
    throttled = {"errors": [{"status": 429, "code": "TOO_MANY_REQUESTS", "title": "Rate limited"}]}

    def __init__(self, page_size: int = 25):
        super().__init__()
        self.page_size = page_size
        self.spaces: dict[str, dict[str, Any]] = {}  # id -> {id, key, name, readers: [(type, id)]}
        self.pages: dict[str, dict[str, Any]] = {}  # id -> {id, spaceId, parentId, title, body, version, restrictions, attachments}
        self._ids = count(1001)
        self.groups: dict[str, list[str]] = {}  # group id -> account ids

    # -- the test's side -------------------------------------------------------------------------
    def space(self, key: str, name: str, readers: list[tuple[str, str]]) -> str:
        space_id = str(next(self._ids))
        self.spaces[space_id] = {"id": space_id, "key": key, "name": name, "readers": readers}
        return space_id

    def page(self, space_id: str, title: str, body: str, parent: str | None = None,
             restrictions: list[tuple[str, str]] | None = None) -> str:
        """A page added, or the one of this title changed (a new version); returns its id."""
        found = next((p for p in self.pages.values() if p["title"] == title and p["spaceId"] == space_id), None)
        page = found or {"id": str(next(self._ids)), "spaceId": space_id, "title": title, "version": 0,
                         "parentId": parent, "restrictions": [], "attachments": []}
        page.update(body=body, version=page["version"] + 1)
        if restrictions is not None:
            page["restrictions"] = restrictions
        self.pages[page["id"]] = page
        return page["id"]

    def attach(self, page_id: str, title: str, data: bytes, media_type: str) -> None:
        self.pages[page_id]["attachments"].append({"id": f"att{next(self._ids)}", "title": title, "data": data,
                                                   "mediaType": media_type, "version": 1})

    def delete(self, title: str) -> None:
        page_id = next(p["id"] for p in self.pages.values() if p["title"] == title)
        del self.pages[page_id]

    def restrict(self, title: str, restrictions: list[tuple[str, str]]) -> None:
        next(p for p in self.pages.values() if p["title"] == title)["restrictions"] = restrictions

    # -- Confluence's side -----------------------------------------------------------------------
    def answer(self, h: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, str]) -> None:
        expected = "Basic " + base64.b64encode(f"{EMAIL}:{TOKEN}".encode()).decode()
        if h.headers.get("Authorization") != expected:
            return self.send(h, 401, {"errors": [{"status": 401, "code": "UNAUTHORIZED", "title": "Unauthorized"}]})
        s = path.removeprefix("/wiki").split("/")[1:]
        if s[:3] == ["api", "v2", "spaces"] and len(s) == 3:
            keys = query.get("keys", "").split(",")
            return self._list(h, path, query, [{"id": x["id"], "key": x["key"], "name": x["name"], "type": "global",
                                                "status": "current"} for x in self.spaces.values() if x["key"] in keys])
        if s[:3] == ["api", "v2", "spaces"] and s[4:] == ["permissions"]:
            readers = self.spaces[s[3]]["readers"]
            return self._list(h, path, query, [{"id": str(n), "principal": {"type": kind, "id": who},
                                                "operation": {"key": "read", "targetType": "space"}}
                                               for n, (kind, who) in enumerate(readers)])
        if s[:3] == ["api", "v2", "spaces"] and s[4:] == ["pages"]:
            return self._list(h, path, query, [self._page_json(p) for p in self.pages.values() if p["spaceId"] == s[3]])
        if s[:3] == ["api", "v2", "pages"]:
            page = self.pages.get(s[3])
            if page is None:
                return self.send(h, 404, {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Not Found"}]})
            if s[4:] == ["attachments"]:
                return self._list(h, path, query, [
                    {"id": a["id"], "status": "current", "title": a["title"], "mediaType": a["mediaType"],
                     "fileSize": len(a["data"]), "pageId": page["id"], "version": {"number": a["version"]},
                     "downloadLink": f"/download/attachments/{page['id']}/{a['title']}?version=1&api=v2",
                     "webuiLink": f"/spaces/X/pages/{page['id']}/attachments"} for a in page["attachments"]])
            body = {**self._page_json(page)}
            if query.get("body-format") == "storage":
                body["body"] = {"storage": {"representation": "storage", "value": page["body"]}}
            return self.send(h, 200, body)
        if s[:5] == ["rest", "api", "content", s[3] if len(s) > 3 else "", "restriction"]:
            page = self.pages[s[3]]
            users = [{"type": "known", "accountId": who} for kind, who in page["restrictions"] if kind == "user"]
            groups = [{"type": "group", "name": who, "id": who} for kind, who in page["restrictions"] if kind == "group"]
            return self.send(h, 200, {"operation": "read", "restrictions": {
                "user": {"results": users, "start": 0, "limit": 200, "size": len(users)},
                "group": {"results": groups, "start": 0, "limit": 200, "size": len(groups)}}})
        if s[:3] == ["rest", "api", "group"] and s[4:] == ["membersByGroupId"]:
            if s[3] not in self.groups:
                return self.send(h, 404, {"statusCode": 404, "message": f"No group found with id: {s[3]}"})
            start, members = int(query.get("start") or 0), self.groups[s[3]]
            results = [{"type": "known", "accountId": a, "accountType": "atlassian"} for a in members[start:start + self.page_size]]
            links = {"next": f"{path}?start={start + self.page_size}"} if start + self.page_size < len(members) else {}
            return self.send(h, 200, {"results": results, "start": start, "limit": self.page_size, "size": len(results),
                                      "_links": links})
        if s[:2] == ["download", "attachments"]:
            page = self.pages[s[2]]
            att = next(a for a in page["attachments"] if a["title"] == s[3])
            return self.send(h, 200, att["data"], {"Content-Type": att["mediaType"]})
        return self.send(h, 404, {"errors": [{"status": 404, "code": "NOT_FOUND", "title": "Not Found"}]})

    def _list(self, h: BaseHTTPRequestHandler, path: str, query: dict[str, str], results: list[dict[str, Any]]) -> None:
        start = int(query.get("cursor") or 0)
        body: dict[str, Any] = {"results": results[start:start + self.page_size], "_links": {"base": f"{self.url}/wiki"}}
        if start + self.page_size < len(results):
            rest = "&".join(f"{k}={v}" for k, v in query.items() if k != "cursor")
            body["_links"]["next"] = f"{path}?{rest}&cursor={start + self.page_size}"
        return self.send(h, 200, body)

    def _page_json(self, p: dict[str, Any]) -> dict[str, Any]:
        return {"id": p["id"], "status": "current", "title": p["title"], "spaceId": p["spaceId"], "parentId": p["parentId"],
                "parentType": "page" if p["parentId"] else None, "authorId": "acc-1",
                "version": {"number": p["version"], "createdAt": "2026-11-27T10:00:00.000Z"},
                "_links": {"webui": f"/spaces/{self.spaces[p['spaceId']]['key']}/pages/{p['id']}/{p['title'].replace(' ', '+')}"}}
