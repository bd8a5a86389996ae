"""SharePoint Online and OneDrive through Microsoft Graph: the files of the document libraries (drives) of the sites
named, each its own document ``<source id>/<drive id>/<item id>`` (an item keeps its id when renamed or moved).

The first sync enumerates each drive with ``driveItem: delta`` (its last page's ``@odata.deltaLink`` is the baseline,
taken as the enumeration ends: what changes meanwhile comes in the next delta); later syncs follow the delta links,
so they read only what changed, and an item's ``deleted`` facet deletes it (a delta feed's explicit delete). A delta
link Graph no longer knows (HTTP 410) means a full enumeration again. An item's ``eTag`` is its version.

Who may read a file is what Graph's ``permissions`` of the item say (``permissions: true``, the default): a user or
group it is granted to as ``user:<Entra object id>`` / ``group:<Entra object id>``, a SharePoint site group as
``group:<site id>/<site group id>``, a sharing link for the organisation as ``link:organization`` and an anonymous one
as ``public``. The permission sync (``verbs.sources.SourceSync.sync_permissions``) lists them again on its own schedule
and fills the group directory with the members of the Entra groups they name (``transitiveMembers``).

Credentials are app-only (client credentials of an Entra app registration, its secret a vault reference resolved in
the knowledge base's tenant); with ``Sites.Selected`` the app reads only the sites granted to it. ``graphUrl`` and
``loginUrl`` (a national cloud, or a test's fake) pass the outbound guard."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from pydantic import Field

from eddi_rag.config import IngestionSource
from eddi_rag.errors import EddiRagError
from eddi_rag.sources.base import (
    Connector,
    CursorExpiredError,
    Globs,
    Item,
    Permissions,
    Settings,
    Sink,
    SourceContext,
    SyncEnd,
    cursor_part,
    outbound,
    secret,
    selected,
)
from eddi_rag.sources.saas import ClientCredentials, JsonApi, ServiceError, ServiceGoneError


class SharePointSettings(Settings):
    """The files of SharePoint Online or OneDrive document libraries, through Microsoft Graph: a delta cursor per
    drive, each file read by whom its permissions name."""

    tenantId: str = Field(min_length=1, description="The Entra tenant: its id or its domain (contoso.onmicrosoft.com).")
    clientId: str = Field(min_length=1, description="The app registration's application (client) id.")
    clientSecret: str = secret(
        "A secret reference (${vault:KEY}) to the app's client secret (app-only access; grant it "
        "Sites.Selected on the sites named).", required=True)
    sites: Globs = Field(min_length=1, description="Sites by id (host,site-guid,web-guid) or as host:/sites/path.")
    drives: Globs = Field(default_factory=list, description="Document libraries by name; none: every library of each site.")
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the file's name.")
    exclude: Globs = Field(default_factory=list)
    permissions: bool = Field(True, description=
        "Each file is read by whom its Graph permissions name (user:<Entra object id>, group:<Entra object "
        "id>, link:organization, public); false: settings.acl.")
    graphUrl: str = outbound("https://graph.microsoft.com", description="Microsoft Graph's endpoint (a national cloud's). The outbound guard checks it.")
    loginUrl: str = outbound("https://login.microsoftonline.com", description="The Entra token endpoint's host. The outbound guard checks it.")



class SharePointSourceError(EddiRagError, ValueError):
    status = 400


def _api(ctx: SourceContext, spec: SharePointSettings) -> JsonApi:
    secret = ctx.resolve(spec.clientSecret)
    if not secret:
        raise SharePointSourceError("sharepoint.clientSecret: a secret reference that resolves to the app's secret")
    login = spec.loginUrl.rstrip("/")
    auth = ClientCredentials(f"{login}/{quote(spec.tenantId)}/oauth2/v2.0/token", spec.clientId, secret,
                             f"{spec.graphUrl.rstrip('/')}/.default")
    return JsonApi(ctx.outbound, "Microsoft Graph", auth, ctx.deadline)


class _Graph:
    def __init__(self, ctx: SourceContext, spec: SharePointSettings):
        self.ctx, self.spec = ctx, spec
        self.base = f"{spec.graphUrl.rstrip('/')}/v1.0"
        self.api = _api(ctx, spec)
        self._sites: dict[str, str] | None = None

    def site(self, site: str) -> dict[str, Any]:
        """A site by its id (``host,guid,guid``) or as ``host:/sites/path``."""
        return self.api.get(f"{self.base}/sites/{quote(site, safe=':/,')}")

    def drives(self) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
        """(site, drive) of each document library the source names."""
        for name in self.spec.sites:
            site = self.site(name)
            for page in self.api.pages(f"{self.base}/sites/{site['id']}/drives"):
                for drive in page.get("value", []):
                    if not self.spec.drives or drive.get("name") in self.spec.drives:
                        yield site, drive

    def acl(self, site_id: str, drive_id: str, item_id: str) -> list[str]:
        out: list[str] = []
        for page in self.api.pages(f"{self.base}/drives/{drive_id}/items/{item_id}/permissions"):
            out += acl_of(page.get("value", []), site_id)
        return list(dict.fromkeys(out))

    def site_of(self, drive_id: str) -> str:
        """The id of the site whose library ``drive_id`` is (of the sites the source names; listed once)."""
        if self._sites is None:
            self._sites = {drive["id"]: site["id"] for site, drive in self.drives()}
        return self._sites.get(drive_id, "site")

    def members(self, group_id: str) -> list[str]:
        """The users in an Entra group, through nested groups (a group Entra does not know: none)."""
        url = f"{self.base}/groups/{quote(group_id)}/transitiveMembers/microsoft.graph.user"
        try:
            return [u["id"] for page in self.api.pages(url, {"$select": "id"}) for u in page.get("value", [])]
        except ServiceError as e:
            if e.code == 404:
                return []
            raise


def acl_of(permissions: list[dict[str, Any]], site_id: str) -> list[str]:
    """Graph ``permission`` resources as principals (any role reads); a SharePoint site group is its site's
    (``group:<site id>/<group id>``: "Owners" of two sites are two principals)."""
    out = []
    for p in permissions:
        link = p.get("link") or {}
        if link.get("scope") == "organization":
            out.append("link:organization")
        elif link.get("scope") == "anonymous":
            out.append("public")
        for granted in [p.get("grantedToV2") or {}, *(p.get("grantedToIdentitiesV2") or [])]:
            if (granted.get("user") or {}).get("id"):
                out.append(f"user:{granted['user']['id']}")
            if (granted.get("group") or {}).get("id"):
                out.append(f"group:{granted['group']['id']}")
            if (granted.get("siteGroup") or {}).get("id"):
                out.append(f"group:{site_id}/{granted['siteGroup']['id']}")
    return out


class SharePointConnector(Connector[SharePointSettings]):
    type = "sharepoint"
    configuration = SharePointSettings
    needs = "an Entra app registration (its client id, its secret in the vault) granted Sites.Selected on the sites, and GroupMember.Read.All"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"SharePoint {', '.join(spec.sites)}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        spec = self.spec(source)
        ctx.outbound.check(spec.graphUrl)
        ctx.outbound.check(spec.loginUrl)

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        self.validate(ctx, source)
        graph = _Graph(ctx, self.spec(source))
        with graph.api:
            for _ in graph.drives():
                pass

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        spec = self.spec(source)
        self.validate(ctx, source)
        links = cursor_part(cursor, "drives", "sharepoint")
        graph = _Graph(ctx, spec)
        with graph.api:
            drives = list(graph.drives())
            if links is not None and set(links) - {d["id"] for _, d in drives}:
                raise CursorExpiredError("a drive of the cursor is no longer among the source's drives")
            ended, after = SyncEnd(complete=links is None), {}
            for site, drive in drives:
                start = (links or {}).get(drive["id"]) or f"{graph.base}/drives/{drive['id']}/root/delta"
                try:
                    after[drive["id"]] = self._drive(graph, source, site, drive, start, sink)
                except ServiceGoneError as e:
                    raise CursorExpiredError(f"Graph no longer knows the delta link of drive {drive.get('name')!r}: {e}") from e
                if after[drive["id"]] is None:
                    return SyncEnd(False, None, ["the sink stopped the sync"], None)
            if graph.api.waited:
                ended.notes.append(f"Graph throttled the sync: {graph.api.waited:.0f} s spent waiting as it asked")
            ended.cursor = json.dumps({"drives": after}, sort_keys=True)
            return ended

    def _drive(self, graph: _Graph, source: IngestionSource, site: dict[str, Any], drive: dict[str, Any], start: str,
               sink: Sink) -> str | None:
        """Tell ``sink`` the drive's items from ``start`` (a delta link, or the drive's root delta); returns the drive's
        next delta link, None when the sink stopped."""
        spec, sid = self.spec(source), source.effective_id
        delta = None
        for page in graph.api.pages(start):
            for entry in page.get("value", []):
                document_id = f"{sid}/{drive['id']}/{entry['id']}"
                if "deleted" in entry or "@removed" in entry:
                    sink.deleted(document_id)
                    continue
                if "file" not in entry or not selected(entry.get("name", ""), spec.include, spec.exclude):
                    continue
                size, limit = entry.get("size") or 0, graph.ctx.max_bytes
                if limit is not None and size > limit:
                    sink.error(document_id, f"{size:,} bytes, over the limit of {limit:,} (settings.maxBytesPerPage or EDDI_RAG_MAX_UPLOAD_MB): not read")
                    continue
                name = f"{site.get('displayName') or site.get('name') or 'site'}/{drive.get('name') or 'drive'}/{entry['name']}"
                if not sink.document(self._item(graph, source, site["id"], drive["id"], entry, name)):
                    return None
            delta = page.get("@odata.deltaLink") or delta
        return delta or start

    def _item(self, graph: _Graph, source: IngestionSource, site_id: str, drive_id: str, entry: dict[str, Any], name: str) -> Item:
        """A file of a drive as a source document (its permissions read now, its bytes when fetched)."""
        spec = self.spec(source)
        item_id = entry["id"]
        content = f"{graph.base}/drives/{drive_id}/items/{item_id}/content"
        limit = graph.ctx.max_bytes

        def fetch() -> tuple[bytes, str | None]:
            return graph.api.download(content, limit)

        return Item(f"{source.effective_id}/{drive_id}/{item_id}", name, fetch,
                    acl=graph.acl(site_id, drive_id, item_id) if spec.permissions else None, version=entry.get("eTag"),
                    url=entry.get("webUrl"), media_type=(entry.get("file") or {}).get("mimeType"),
                    metadata={"lastModified": entry["lastModifiedDateTime"]} if entry.get("lastModifiedDateTime") else {})

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        spec = self.spec(source)
        drive_id, item_id = document_id.removeprefix(f"{source.effective_id}/").split("/", 1)
        graph = _Graph(ctx, spec)
        with graph.api:
            return self._item(graph, source, graph.site_of(drive_id), drive_id,
                              graph.api.get(f"{graph.base}/drives/{drive_id}/items/{item_id}"), name)

    def keeps_permissions(self, source: IngestionSource) -> bool:
        return self.spec(source).permissions

    def permissions(self, ctx: SourceContext, source: IngestionSource, document_ids: list[str]) -> Permissions:
        """Who may read each of ``document_ids`` now (a file Graph no longer has: nobody), and the members of the Entra
        groups those permissions name."""
        spec = self.spec(source)
        graph, out = _Graph(ctx, spec), Permissions()
        with graph.api:
            for site in spec.sites:  # signed in and the sites found first, documents or none (a sync that asked nothing said nothing)
                graph.site(site)
            for document_id in document_ids:
                drive_id, item_id = document_id.removeprefix(f"{source.effective_id}/").split("/", 1)
                try:
                    out.acls[document_id] = graph.acl(graph.site_of(drive_id), drive_id, item_id)
                except ServiceError as e:  # 404, 410: the file is gone, nobody reads it; else: left as it was
                    if e.code in (404, 410):
                        out.acls[document_id] = []
                    else:
                        out.failures.append({"document": document_id, "reason": str(e)})
            groups = sorted({p.removeprefix("group:") for acl in out.acls.values() for p in acl
                             if p.startswith("group:") and "/" not in p})
            for group in groups:
                for user in graph.members(group):
                    out.groups.setdefault(user, []).append(group)
        return out


CONNECTOR = SharePointConnector()
