"""Google Drive through the Drive API v3: the files of a Shared Drive (``driveId``), or every file shared with the
service account (none), each its own document ``<source id>/<file id>`` (a file keeps its id when renamed or moved).
Google Docs, Sheets and Slides are exported (as HTML, CSV and plain text); other files are downloaded as they are.

The first sync takes the change feed's start page token (``changes.getStartPageToken``) before it lists the files, so
what changes during the backfill comes in the next sync; later syncs read ``changes.list`` from the saved token:
a changed file is read again, a removed or trashed one is deleted. A token Drive rejects lists everything again. A
file's ``version`` is its version: one that did not change is not downloaded.

Who may read a file is what its ``permissions`` say: a user as ``email:<address>``, a group as
``group:<group address>``, a domain as ``link:organization``, anyone as ``public``. The permission sync lists them
again; with ``groupMembers``, it fills the group directory from the Admin SDK's members of those groups (users by
their address: readers' ids must be their e-mail addresses, OIDC ``EDDI_RAG_OIDC_USER_CLAIM=email``).

``credentials`` is a secret reference to a service account's JSON key (its ``token_uri`` receives a signed JWT,
RFC 7523); ``subject`` a user it acts for (domain-wide delegation). ``apiUrl`` (a test's fake) and the key's
``token_uri`` pass the outbound guard."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx
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
    outbound,
    secret,
    selected,
)
from eddi_rag.sources.saas import JsonApi, ServiceError

SCOPES = "https://www.googleapis.com/auth/drive.readonly https://www.googleapis.com/auth/admin.directory.group.member.readonly"
EXPORTS = {"application/vnd.google-apps.document": "text/html", "application/vnd.google-apps.spreadsheet": "text/csv",
           "application/vnd.google-apps.presentation": "text/plain"}
FIELDS = "id,name,mimeType,version,size,webViewLink,modifiedTime,trashed"
ALL_DRIVES = {"supportsAllDrives": "true", "includeItemsFromAllDrives": "true"}


class GoogleDriveSettings(Settings):
    """The files of a Shared Drive, or every file shared with a service account, through the Drive API v3: its change
    feed as the cursor, each file read by whom its permissions name."""

    credentials: str = secret("A secret reference (${vault:KEY}) to the service account's JSON key.", required=True)
    driveId: str | None = Field(None, min_length=1, description="A Shared Drive's id; absent: every file shared with the service account.")
    subject: str | None = Field(None, min_length=1, description="A user the service account acts for (domain-wide delegation).")
    include: Globs = Field(default_factory=lambda: ["*"], description="Globs on the file's name.")
    exclude: Globs = Field(default_factory=list)
    permissions: bool = Field(True, description=
        "Each file is read by whom its Drive permissions name (email:<address>, group:<group address>, "
        "link:organization for a domain, public for anyone); false: settings.acl.")
    groupMembers: bool = Field(True, description=
        "The permission sync fills the group directory with the members of the groups the permissions name "
        "(Admin SDK; needs domain-wide delegation).")
    apiUrl: str = outbound("https://www.googleapis.com", description="The Drive API's endpoint. The outbound guard checks it.")
    adminUrl: str = outbound("https://admin.googleapis.com", description="The Admin SDK's endpoint. The outbound guard checks it.")



class GoogleDriveSourceError(EddiRagError, ValueError):
    status = 400


class ServiceAccount:
    """A service account's access token: a JWT signed with its key exchanged at its ``token_uri`` (RFC 7523)."""

    def __init__(self, key: dict[str, Any], subject: str | None):
        self.key, self.subject = key, subject
        self._token, self._until = "", 0.0

    def token(self, client: httpx.Client) -> str:
        import jwt

        if time.monotonic() < self._until:
            return self._token
        now = int(time.time())
        claims = {"iss": self.key["client_email"], "scope": SCOPES, "aud": self.key["token_uri"], "iat": now, "exp": now + 3600,
                  **({"sub": self.subject} if self.subject else {})}
        assertion = jwt.encode(claims, self.key["private_key"], algorithm="RS256",
                               headers={"kid": self.key.get("private_key_id", "")})
        response = client.post(self.key["token_uri"], data={"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer",
                                                            "assertion": assertion})
        if response.status_code != 200:
            raise ServiceError(f"gdrive: the token endpoint refused the service account {self.key['client_email']}: HTTP "
                               f"{response.status_code} {response.text[:200]}", response.status_code)
        body = response.json()
        self._token, self._until = body["access_token"], time.monotonic() + max(0, int(body.get("expires_in", 3600)) - 60)
        return self._token


def _api(ctx: SourceContext, spec: GoogleDriveSettings) -> JsonApi:
    raw = ctx.resolve(spec.credentials)
    try:
        key = json.loads(raw)
        assert key.get("type") == "service_account" and key["client_email"] and key["private_key"] and key["token_uri"]
    except (ValueError, TypeError, KeyError, AssertionError, AttributeError):
        raise GoogleDriveSourceError("gdrive.credentials: not a service account's JSON key") from None
    return JsonApi(ctx.outbound, "Google Drive", ServiceAccount(key, spec.subject), ctx.deadline)


class _Drive:
    def __init__(self, ctx: SourceContext, spec: GoogleDriveSettings):
        self.ctx, self.spec, self.api = ctx, spec, _api(ctx, spec)
        self.base = f"{spec.apiUrl.rstrip('/')}/drive/v3"
        self.where = {"driveId": spec.driveId, "corpora": "drive"} if spec.driveId else {}

    def pages(self, url: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Each page of a Drive listing (``pageToken`` / ``nextPageToken``)."""
        token: str | None = None
        while True:
            page = self.api.get(url, {**params, **({"pageToken": token} if token else {})})
            yield page
            token = page.get("nextPageToken")
            if not token:
                return

    def start_token(self) -> str:
        params = {"supportsAllDrives": "true", **({"driveId": self.spec.driveId} if self.spec.driveId else {})}
        return str(self.api.get(f"{self.base}/changes/startPageToken", params)["startPageToken"])

    def files(self) -> Iterator[dict[str, Any]]:
        params = {**ALL_DRIVES, **self.where, "q": "trashed = false and mimeType != 'application/vnd.google-apps.folder'",
                  "fields": f"nextPageToken,files({FIELDS})", "pageSize": 1000}
        for page in self.pages(f"{self.base}/files", params):
            yield from page.get("files", [])

    def acl(self, file_id: str) -> list[str]:
        params = {"supportsAllDrives": "true", "fields": "nextPageToken,permissions(id,type,role,emailAddress,domain)"}
        return list(dict.fromkeys(p for page in self.pages(f"{self.base}/files/{quote(file_id)}/permissions", params)
                                  for p in acl_of(page.get("permissions", []))))

    def members(self, group: str) -> list[str]:
        url = f"{self.spec.adminUrl.rstrip('/')}/admin/directory/v1/groups/{quote(group)}/members"
        return [m["email"] for page in self.pages(url, {"includeDerivedMembership": "true"})
                for m in page.get("members", []) if m.get("type") == "USER" and m.get("email")]


def acl_of(permissions: list[dict[str, Any]]) -> list[str]:
    """Drive ``permission`` resources as principals (any role reads)."""
    out = []
    for p in permissions:
        kind = p.get("type")
        if kind == "user" and p.get("emailAddress"):
            out.append(f"email:{p['emailAddress'].lower()}")
        elif kind == "group" and p.get("emailAddress"):
            out.append(f"group:{p['emailAddress'].lower()}")
        elif kind == "domain":
            out.append("link:organization")
        elif kind == "anyone":
            out.append("public")
    return out


class GoogleDriveConnector(Connector[GoogleDriveSettings]):
    type = "gdrive"
    configuration = GoogleDriveSettings
    needs = "a service account's JSON key in the vault, Drive read access to what is shared with it (domain-wide delegation for group members)"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"Google Drive {spec.driveId or '(shared with the service account)'}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        ctx.outbound.check(self.spec(source).apiUrl)
        ctx.outbound.check(self.spec(source).adminUrl)

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        drive = _Drive(ctx, self.spec(source))
        with drive.api:
            drive.start_token()

    def keeps_permissions(self, source: IngestionSource) -> bool:
        return self.spec(source).permissions

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        spec = self.spec(source)
        self.validate(ctx, source)
        drive = _Drive(ctx, spec)
        with drive.api:
            ended = self._listed(drive, source, sink) if cursor is None else self._changes(drive, source, cursor, sink)
        if drive.api.waited:
            ended.notes.append(f"Google Drive throttled the sync: {drive.api.waited:.0f} s spent waiting as it asked")
        return ended

    def _listed(self, drive: _Drive, source: IngestionSource, sink: Sink) -> SyncEnd:
        start = drive.start_token()  # the baseline, before the backfill
        for entry in drive.files():
            if not self._tell(drive, source, entry, sink):
                return SyncEnd(False, None, ["the sink stopped the sync"], None)
        return SyncEnd(True, cursor=start)

    def _changes(self, drive: _Drive, source: IngestionSource, cursor: str, sink: Sink) -> SyncEnd:
        params = {**ALL_DRIVES, **({"driveId": drive.spec.driveId} if drive.spec.driveId else {}),
                  "fields": f"nextPageToken,newStartPageToken,changes(fileId,removed,changeType,file({FIELDS}))",
                  "pageSize": 1000, "pageToken": cursor}
        token, after = cursor, None
        while after is None:
            try:
                page = drive.api.get(f"{drive.base}/changes", {**params, "pageToken": token})
            except ServiceError as e:
                if e.code in (400, 404, 410):
                    raise CursorExpiredError(f"Drive rejected the change token: {e}") from e
                raise
            for change in page.get("changes", []):
                if change.get("changeType", "file") != "file":
                    continue
                entry = change.get("file") or {}
                if change.get("removed") or entry.get("trashed"):
                    sink.deleted(f"{source.effective_id}/{change['fileId']}")
                elif entry.get("mimeType") != "application/vnd.google-apps.folder" and entry:
                    if not self._tell(drive, source, entry, sink):
                        return SyncEnd(False, None, ["the sink stopped the sync"], None)
            token, after = page.get("nextPageToken"), page.get("newStartPageToken")
            if token is None and after is None:  # (neither: Drive's word that nothing follows)
                after = cursor
        return SyncEnd(False, cursor=after)  # a delta: it names only what changed

    def _tell(self, drive: _Drive, source: IngestionSource, entry: dict[str, Any], sink: Sink) -> bool:
        spec = drive.spec
        document_id = f"{source.effective_id}/{entry['id']}"
        if not selected(entry.get("name", ""), spec.include, spec.exclude):
            return True
        size, limit = int(entry.get("size") or 0), drive.ctx.max_bytes
        if limit is not None and size > limit:
            sink.error(document_id, f"{size:,} bytes, over the limit of {limit:,} (settings.maxBytesPerPage or EDDI_RAG_MAX_UPLOAD_MB): not read")
            return True
        return sink.document(self._item(drive, source, entry))

    def _item(self, drive: _Drive, source: IngestionSource, entry: dict[str, Any]) -> Item:
        spec, ctx = drive.spec, drive.ctx
        mime, export = entry.get("mimeType", ""), EXPORTS.get(entry.get("mimeType", ""))
        url = f"{drive.base}/files/{quote(entry['id'])}" + (f"/export?mimeType={quote(export)}" if export else "?alt=media&supportsAllDrives=true")
        name = entry.get("name", entry["id"]) + {"text/html": ".html", "text/csv": ".csv", "text/plain": ".txt"}.get(export or "", "")

        def fetch() -> tuple[bytes, str | None]:
            return drive.api.download(url, ctx.max_bytes)

        return Item(f"{source.effective_id}/{entry['id']}", name, fetch, acl=drive.acl(entry["id"]) if spec.permissions else None,
                    version=str(entry.get("version") or entry.get("modifiedTime") or "") or None, url=entry.get("webViewLink"),
                    media_type=export or mime, metadata={"lastModified": entry["modifiedTime"]} if entry.get("modifiedTime") else {})

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        spec = self.spec(source)
        drive = _Drive(ctx, spec)
        with drive.api:
            entry = drive.api.get(f"{drive.base}/files/{quote(document_id.rsplit('/', 1)[1])}",
                                  {"supportsAllDrives": "true", "fields": FIELDS})
            return self._item(drive, source, entry)

    def permissions(self, ctx: SourceContext, source: IngestionSource, document_ids: list[str]) -> Permissions:
        spec = self.spec(source)
        drive, out = _Drive(ctx, spec), Permissions()
        with drive.api:
            for document_id in document_ids:
                try:
                    out.acls[document_id] = drive.acl(document_id.rsplit("/", 1)[1])
                except ServiceError as e:  # 404: gone, nobody reads it; else: left as it was
                    if e.code in (404, 410):
                        out.acls[document_id] = []
                    else:
                        out.failures.append({"document": document_id, "reason": str(e)})
            if spec.groupMembers:
                for group in sorted({p.removeprefix("group:") for acl in out.acls.values() for p in acl if p.startswith("group:")}):
                    for user in drive.members(group):
                        out.groups.setdefault(user.lower(), []).append(group)
        return out


CONNECTOR = GoogleDriveConnector()
