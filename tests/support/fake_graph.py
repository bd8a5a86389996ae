"""A fake of Microsoft Graph on 127.0.0.1, speaking the JSON of Graph's documentation (v1.0) for what the sharepoint
connector asks: Entra's client-credentials token endpoint (``POST /{tenant}/oauth2/v2.0/token``), a site by id or
``host:/sites/path``, a site's drives, ``driveItem: delta`` (pages linked by ``@odata.nextLink``, the last one's
``@odata.deltaLink``; a changed item in full, a deleted one with its ``deleted`` facet; an unknown or expired token:
410 ``resyncRequired``), an item, its ``content`` (a 302 to a pre-authenticated download URL), its ``permissions``
(``grantedToV2``, sharing ``link``s), and a group's ``transitiveMembers``. A request without the token it issued is a
401; ``throttle[path prefix] = n`` answers the next n requests there with 429 and ``Retry-After: 1``.

The drive is the test's: ``put`` and ``remove`` change it (each a change the next delta returns), ``grant`` changes an
item's permissions (not a change of the delta, as in Graph without the ``Prefer: deltashowsharingchanges`` header)."""

from __future__ import annotations

import secrets
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.support.fake_service import FakeService

TENANT, CLIENT_ID, CLIENT_SECRET = "contoso.onmicrosoft.com", "app-1", "s3cret"
HOST = "contoso.sharepoint.com"


class FakeGraph(FakeService):
    throttled = {"error": {"code": "activityLimitReached", "message": "throttled"}}

    def __init__(self, page_size: int = 50):
        super().__init__()
        self.page_size = page_size
        self.sites: dict[str, dict[str, Any]] = {}  # id -> {id, displayName, webUrl, path, drives: [drive id]}
        self.drives: dict[str, dict[str, Any]] = {}  # id -> {id, name, items: {id: item}, seq}
        self.groups: dict[str, list[str]] = {}  # group id -> user ids (transitive)
        self.expired: set[str] = set()  # delta tokens Graph no longer knows
        self.tokens: set[str] = set()
        self._lock = threading.Lock()

    # -- the test's side -------------------------------------------------------------------------
    def site(self, path: str, name: str) -> str:
        site_id = f"{HOST},{secrets.token_hex(4)},{secrets.token_hex(4)}"
        self.sites[site_id] = {"id": site_id, "displayName": name, "webUrl": f"https://{HOST}{path}", "path": path,
                               "drives": []}
        return site_id

    def drive(self, site_id: str, name: str = "Documents") -> str:
        drive_id = f"b!{secrets.token_hex(8)}"
        self.drives[drive_id] = {"id": drive_id, "name": name, "items": {}, "seq": 1, "site": site_id}
        self.sites[site_id]["drives"].append(drive_id)
        return drive_id

    def put(self, drive_id: str, name: str, data: bytes, mime: str = "text/markdown",
            permissions: list[dict[str, Any]] | None = None) -> str:
        """A file added, or the one of this name changed; returns its item id."""
        with self._lock:
            drive = self.drives[drive_id]
            drive["seq"] += 1
            found = next((i for i in drive["items"].values() if i["name"] == name and not i["deleted"]), None)
            item = found or {"id": secrets.token_hex(6).upper(), "name": name, "deleted": False, "permissions": []}
            item.update(data=data, mime=mime, seq=drive["seq"], eTag=f'"{{{secrets.token_hex(4)}}},{drive["seq"]}"')
            if permissions is not None:
                item["permissions"] = permissions
            drive["items"][item["id"]] = item
            return item["id"]

    def remove(self, drive_id: str, name: str) -> None:
        with self._lock:
            drive = self.drives[drive_id]
            drive["seq"] += 1
            item = next(i for i in drive["items"].values() if i["name"] == name and not i["deleted"])
            item.update(deleted=True, seq=drive["seq"])

    def grant(self, drive_id: str, name: str, permissions: list[dict[str, Any]]) -> None:
        item = next(i for i in self.drives[drive_id]["items"].values() if i["name"] == name and not i["deleted"])
        item["permissions"] = permissions

    def expire_tokens(self) -> None:
        """Every delta token issued so far is unknown from now on (410 resyncRequired)."""
        for drive in self.drives.values():
            self.expired.update(str(n) for n in range(drive["seq"] + 1))

    # -- Graph's side ----------------------------------------------------------------------------
    def answer(self, h: BaseHTTPRequestHandler, method: str, path: str, query: dict[str, str]) -> None:
        if method == "POST" and path == f"/{TENANT}/oauth2/v2.0/token":
            form = self.form(h)
            if form.get("client_id") != CLIENT_ID or form.get("client_secret") != CLIENT_SECRET \
                    or form.get("grant_type") != "client_credentials":
                return self.send(h, 401, {"error": "invalid_client", "error_description": "AADSTS7000215: Invalid client secret provided."})
            token = secrets.token_hex(16)
            self.tokens.add(token)
            return self.send(h, 200, {"token_type": "Bearer", "expires_in": 3599, "ext_expires_in": 3599,
                                       "access_token": token})
        if path.startswith("/download/"):
            _, _, drive_id, item_id = path.split("/")
            item = self.drives[drive_id]["items"][item_id]
            return self.send(h, 200, item["data"], {"Content-Type": item["mime"]})
        if h.headers.get("Authorization", "").removeprefix("Bearer ") not in self.tokens:
            return self.send(h, 401, {"error": {"code": "InvalidAuthenticationToken", "message": "Access token is empty."}})
        try:
            self._graph(h, path, query)
        except KeyError:
            self.send(h, 404, {"error": {"code": "itemNotFound", "message": "The resource could not be found."}})

    def _graph(self, h: BaseHTTPRequestHandler, path: str, query: dict[str, str]) -> None:
        segments = path.removeprefix("/v1.0/").split("/")
        if segments[0] == "sites":
            if len(segments) == 3 and segments[2] == "drives":
                site = self.sites[segments[1]]
                return self.send(h, 200, {"value": [self._drive_json(self.drives[d]) for d in site["drives"]]})
            ref = path.removeprefix("/v1.0/sites/")
            site = self.sites.get(ref) or next(s for s in self.sites.values() if f"{HOST}:{s['path']}" == ref)
            return self.send(h, 200, {k: v for k, v in site.items() if k not in ("path", "drives")})
        if segments[0] == "groups" and segments[2:] == ["transitiveMembers", "microsoft.graph.user"]:
            return self.send(h, 200, {"value": [{"@odata.type": "#microsoft.graph.user", "id": u}
                                                 for u in self.groups[segments[1]]]})
        drive = self.drives[segments[1]]
        if segments[2:] == ["root", "delta"]:
            return self._delta(h, drive, query)
        item = drive["items"][segments[3]]
        if item["deleted"]:
            raise KeyError(item["id"])
        if segments[4:] == ["content"]:
            h.send_response(302)
            h.send_header("Location", f"{self.url}/download/{drive['id']}/{item['id']}")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return None
        if segments[4:] == ["permissions"]:
            return self.send(h, 200, {"value": [{"id": f"p{n}", "roles": ["read"], **p}
                                                 for n, p in enumerate(item["permissions"])]})
        return self.send(h, 200, self._item_json(drive, item))

    def _delta(self, h: BaseHTTPRequestHandler, drive: dict[str, Any], query: dict[str, str]) -> None:
        base = f"{self.url}/v1.0/drives/{drive['id']}/root/delta"
        token = query.get("token")
        if token is not None and (token in self.expired or not token.isdigit()):
            return self.send(h, 410, {"error": {"code": "resyncRequired", "message": "Resync required. Replace any "
                                                 "local items with the server's version (including deletes)."}})
        with self._lock:
            upto = int(query.get("upto", drive["seq"]))  # the enumeration's baseline, kept across its pages
            since = int(token) if token is not None else 0
            changed = sorted((i for i in drive["items"].values() if since < i["seq"] <= upto and
                              (token is not None or not i["deleted"])), key=lambda i: i["seq"])
        entries = ([{"id": "ROOT", "name": "root", "root": {}, "folder": {"childCount": len(changed)}}] if token is None else [])
        entries += [self._item_json(drive, i) for i in changed]
        skip = int(query.get("skip", "0"))
        page = entries[skip:skip + self.page_size]
        body: dict[str, Any] = {"@odata.context": "https://graph.microsoft.com/v1.0/$metadata#Collection(driveItem)",
                                "value": page}
        if skip + self.page_size < len(entries):
            body["@odata.nextLink"] = f"{base}?skip={skip + self.page_size}&upto={upto}" + \
                                      (f"&token={token}" if token is not None else "")
        else:
            body["@odata.deltaLink"] = f"{base}?token={upto}"
        return self.send(h, 200, body)

    def _drive_json(self, drive: dict[str, Any]) -> dict[str, Any]:
        return {"id": drive["id"], "name": drive["name"], "driveType": "documentLibrary",
                "webUrl": f"{self.sites[drive['site']]['webUrl']}/{drive['name']}"}

    def _item_json(self, drive: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
        if item["deleted"]:
            return {"id": item["id"], "deleted": {"state": "deleted"}, "parentReference": {"driveId": drive["id"]}}
        return {"id": item["id"], "name": item["name"], "eTag": item["eTag"], "cTag": item["eTag"],
                "size": len(item["data"]), "lastModifiedDateTime": "2026-11-27T10:00:00Z",
                "webUrl": f"{self.sites[drive['site']]['webUrl']}/{drive['name']}/{item['name']}",
                "file": {"mimeType": item["mime"]}, "parentReference": {"driveId": drive["id"], "id": "ROOT"}}
