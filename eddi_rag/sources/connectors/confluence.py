"""Confluence Cloud through its REST API v2: the pages of the spaces named (``spaces``: their keys), each page a
document ``<source id>/<page id>`` read as HTML (its storage format), and each attachment of a page a document of its
own (``<source id>/<page id>/<attachment id>``, cited ``Page title.html > report.pdf, page 2``). Every run lists the spaces' pages
(``_links.next`` cursors); a page's or attachment's version number is its version, so an unchanged one is not read;
one no longer listed is gone (deletion by absence).

Who may read a page: the users and groups its read restrictions name (``user:<accountId>``, ``group:<group id>``);
a page under restricted ancestors is read only by those every restricted level names (the intersection of their
lists, so a reader Confluence would refuse is never let in: one it would admit through a group on one level and by
name on another is left out); an unrestricted page by whom the space's ``read`` permissions name. An attachment is read
as its page. The permission sync lists them again and fills the group directory with the members of the groups they
name (by account id: readers' ids must be their Atlassian account ids).

``email`` and ``apiToken`` (a secret reference) authenticate (an Atlassian API token, HTTP Basic); ``baseUrl``
(``https://<site>.atlassian.net``) passes the outbound guard."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

from pydantic import Field

from eddi_rag.config import IngestionSource
from eddi_rag.errors import EddiRagError
from eddi_rag.sources.base import Connector, Globs, Item, Permissions, Settings, Sink, SourceContext, SyncEnd, outbound, secret, selected
from eddi_rag.sources.saas import JsonApi, ServiceError


class ConfluenceSettings(Settings):
    """The pages of Confluence Cloud spaces, and their attachments, through its REST API v2: each read by whom its
    restrictions (else the space's permissions) name."""

    baseUrl: str = outbound(description="https://<site>.atlassian.net. The outbound guard checks it.")
    email: str = Field(min_length=3, description="The Atlassian account the API token belongs to.")
    apiToken: str = secret("A secret reference (${vault:KEY}) to an Atlassian API token.", required=True)
    spaces: Globs = Field(min_length=1, description="Space keys (HR, ENG).")
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the page's title.")
    exclude: Globs = Field(default_factory=list)
    attachments: bool = Field(True, description="Each page's attachments too, each a document read as its page.")
    permissions: bool = Field(True, description=
        "Pages read by whom their read restrictions (and their ancestors') name, else the space's read "
        "permissions (user:<accountId>, group:<group id>); false: settings.acl.")



class ConfluenceSourceError(EddiRagError, ValueError):
    status = 400


def _api(ctx: SourceContext, spec: ConfluenceSettings) -> JsonApi:
    token = ctx.resolve(spec.apiToken)
    if not token:
        raise ConfluenceSourceError("confluence.apiToken: a secret reference that resolves to an Atlassian API token")
    basic = base64.b64encode(f"{spec.email}:{token}".encode()).decode()
    return JsonApi(ctx.outbound, "Confluence", lambda: {"Authorization": f"Basic {basic}", "Accept": "application/json"},
                   ctx.deadline)


class _Wiki:
    def __init__(self, ctx: SourceContext, spec: ConfluenceSettings):
        self.ctx, self.spec, self.api = ctx, spec, _api(ctx, spec)
        self.site = spec.baseUrl.rstrip("/")
        self.base = f"{self.site}/wiki"
        self._restricted: dict[str, list[str] | None] = {}

    def results(self, path: str, params: dict[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Every result of a v2 listing, following ``_links.next`` (relative to the site)."""
        url: str | None = f"{self.base}{path}"
        while url:
            page = self.api.get(url, params)
            yield from page.get("results", [])
            following = (page.get("_links") or {}).get("next")
            url, params = (f"{self.site}{following}" if following else None), None

    def spaces(self) -> list[dict[str, Any]]:
        found = list(self.results("/api/v2/spaces", {"keys": ",".join(self.spec.spaces), "limit": 250}))
        missing = set(self.spec.spaces) - {s.get("key") for s in found}
        if missing:
            raise ConfluenceSourceError(f"confluence.spaces: {', '.join(sorted(missing))} not found, or not readable "
                                        "with these credentials")
        return found

    def space_readers(self, space_id: str) -> list[str]:
        out = []
        for p in self.results(f"/api/v2/spaces/{space_id}/permissions", {"limit": 250}):
            principal, operation = p.get("principal") or {}, p.get("operation") or {}
            if operation.get("key") == "read" and operation.get("targetType") == "space" and principal.get("id"):
                if principal.get("type") in ("user", "group"):
                    out.append(f"{principal['type']}:{principal['id']}")
        return list(dict.fromkeys(out))

    def restricted(self, page_id: str) -> list[str] | None:
        """Whom a page's own read restrictions name (None: it has none)."""
        if page_id not in self._restricted:
            found = self.api.get(f"{self.base}/rest/api/content/{page_id}/restriction/byOperation/read")
            held = found.get("restrictions") or {}
            users = [f"user:{u['accountId']}" for u in (held.get("user") or {}).get("results", []) if u.get("accountId")]
            groups = [f"group:{g.get('id') or g.get('name')}" for g in (held.get("group") or {}).get("results", [])
                      if g.get("id") or g.get("name")]
            self._restricted[page_id] = (users + groups) or None
        return self._restricted[page_id]

    def members(self, group_id: str) -> list[str]:
        """The account ids of a Confluence group's members (v1 ``membersByGroupId``, paged by ``start``)."""
        out, start = [], 0
        while True:
            page = self.api.get(f"{self.base}/rest/api/group/{group_id}/membersByGroupId", {"start": start, "limit": 200})
            found = [u["accountId"] for u in page.get("results", []) if u.get("accountId")]
            out += found
            if not found or not (page.get("_links") or {}).get("next"):
                return out
            start += len(page.get("results", []))

    def acl(self, page_id: str, parents: dict[str, str | None], space_readers: list[str]) -> list[str]:
        """Who may read a page: the intersection of the read restrictions on it and its ancestors, else the space's
        readers."""
        levels: list[list[str]] = []
        at: str | None = page_id
        seen: set[str] = set()
        while at and at not in seen:
            seen.add(at)
            if (restricted := self.restricted(at)) is not None:
                levels.append(restricted)
            at = parents.get(at)
        if not levels:
            return space_readers
        return [p for p in levels[0] if all(p in level for level in levels[1:])]


class ConfluenceConnector(Connector[ConfluenceSettings]):
    type = "confluence"
    configuration = ConfluenceSettings
    needs = "a Confluence Cloud site, the space keys, and an Atlassian account's API token in the vault"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"Confluence {spec.baseUrl} {', '.join(spec.spaces)}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        ctx.outbound.check(self.spec(source).baseUrl)

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        wiki = _Wiki(ctx, self.spec(source))
        with wiki.api:
            wiki.spaces()

    def keeps_permissions(self, source: IngestionSource) -> bool:
        return self.spec(source).permissions

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        spec = self.spec(source)
        self.validate(ctx, source)
        wiki = _Wiki(ctx, spec)
        with wiki.api:
            for space in wiki.spaces():
                readers = wiki.space_readers(space["id"]) if spec.permissions else []
                pages = [p for p in wiki.results(f"/api/v2/spaces/{space['id']}/pages", {"limit": 250, "status": "current"})]
                parents = {p["id"]: p.get("parentId") for p in pages}
                for page in pages:
                    if not selected(page.get("title", ""), spec.include, spec.exclude):
                        continue
                    acl = wiki.acl(page["id"], parents, readers) if spec.permissions else None
                    if not sink.document(self._page(wiki, source, space, page, acl)):
                        return SyncEnd(False, None, ["the sink stopped the sync"])
                    if spec.attachments and not self._attachments(wiki, source, page, acl, sink):
                        return SyncEnd(False, None, ["the sink stopped the sync"])
            if wiki.api.waited:
                return SyncEnd(True, notes=[f"Confluence throttled the sync: {wiki.api.waited:.0f} s spent waiting as it asked"])
        return SyncEnd(True)

    def _page(self, wiki: _Wiki, source: IngestionSource, space: dict[str, Any], page: dict[str, Any],
              acl: list[str] | None) -> Item:
        url = f"{wiki.base}/api/v2/pages/{page['id']}"

        def fetch() -> tuple[bytes, str | None]:
            body = wiki.api.get(url, {"body-format": "storage"}).get("body", {}).get("storage", {}).get("value", "")
            title = str(page.get("title", ""))
            return f"<html><head><title>{_escape(title)}</title></head><body><h1>{_escape(title)}</h1>{body}</body></html>".encode(), "text/html"

        webui = (page.get("_links") or {}).get("webui")
        return Item(f"{source.effective_id}/{page['id']}", f"{page.get('title') or page['id']}.html", fetch, acl=acl,
                    version=str((page.get("version") or {}).get("number") or "") or None,
                    url=f"{wiki.base}{webui}" if webui else None, media_type="text/html",
                    metadata={"space": space.get("key")})

    def _attachments(self, wiki: _Wiki, source: IngestionSource, page: dict[str, Any], acl: list[str] | None, sink: Sink) -> bool:
        ctx = wiki.ctx
        for att in wiki.results(f"/api/v2/pages/{page['id']}/attachments", {"limit": 250}):
            document_id = f"{source.effective_id}/{page['id']}/{att['id']}"
            size, limit = int(att.get("fileSize") or 0), ctx.max_bytes
            if limit is not None and size > limit:
                sink.error(document_id, f"{size:,} bytes, over the limit of {limit:,} (settings.maxBytesPerPage or EDDI_RAG_MAX_UPLOAD_MB): not read")
                continue
            link = f"{wiki.base}{att['downloadLink']}"

            def fetch(link: str = link) -> tuple[bytes, str | None]:
                return wiki.api.download(link, ctx.max_bytes)

            name = f"{page.get('title') or page['id']}.html > {att.get('title') or att['id']}"  # cited inside its page
            item = Item(document_id, name, fetch, acl=acl,
                        version=str((att.get("version") or {}).get("number") or "") or None,
                        media_type=att.get("mediaType"), metadata={"page": page.get("title")})
            if not sink.document(item):
                return False
        return True

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        from eddi_rag.sources.base import listed_again

        return listed_again(self, ctx, source, document_id, name)

    def permissions(self, ctx: SourceContext, source: IngestionSource, document_ids: list[str]) -> Permissions:
        """Who may read each page (and its attachments) now; a page no longer in its space: nobody."""
        spec = self.spec(source)
        wiki, out = _Wiki(ctx, spec), Permissions()
        with wiki.api:
            acls: dict[str, list[str]] = {}
            failed: dict[str, str] = {}  # page id: why its permissions could not be read (its documents left as they were)
            for space in wiki.spaces():
                readers = wiki.space_readers(space["id"])
                pages = list(wiki.results(f"/api/v2/spaces/{space['id']}/pages", {"limit": 250, "status": "current"}))
                parents = {p["id"]: p.get("parentId") for p in pages}
                for page in pages:
                    try:
                        acls[page["id"]] = wiki.acl(page["id"], parents, readers)
                    except ServiceError as e:
                        failed[page["id"]] = str(e)
            for document_id in document_ids:
                page_id = document_id.removeprefix(f"{source.effective_id}/").split("/")[0]
                if page_id in failed:
                    out.failures.append({"document": document_id, "reason": failed[page_id]})
                else:
                    out.acls[document_id] = acls.get(page_id, [])
            for group in sorted({p.removeprefix("group:") for acl in out.acls.values() for p in acl if p.startswith("group:")}):
                try:
                    members = wiki.members(group)
                except ServiceError as e:
                    if e.code != 404:
                        raise
                    members = []  # (a group Confluence no longer has)
                for user in members:
                    out.groups.setdefault(user, []).append(group)
        return out


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


CONNECTOR = ConfluenceConnector()
