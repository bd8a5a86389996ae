"""A mailbox over IMAP (IMAPClient): each mail of the folders named is a document, read by the mail loader with its
attachments (cited ``INBOX/Quarterly report.eml > report.pdf, page 2``), its id a digest of its ``Message-ID`` (a mail
replaced by one with the same Message-ID, such as an edited draft, keeps its id), its version a digest of its
Message-ID, size and Date (else its UIDVALIDITY and UID): a mail already ingested is not downloaded again, even after the
server renumbered its folder.

The cursor is, per folder, its UIDVALIDITY and the UIDs seen with their documents: a later sync asks only for the
UIDs (``UID SEARCH ALL``), reads the headers of the new ones, says deleted the documents whose UIDs are gone and
unchanged the rest. A folder whose UIDVALIDITY changed (the server renumbered it) lists the mailbox in full again.
``senders`` keeps only mails from those addresses (``a@example.com``) or domains (``@example.com``); none: every mail.
The password is a secret reference resolved in the knowledge base's tenant; the host passes the outbound guard."""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
from collections.abc import Callable
from email.parser import BytesHeaderParser
from email.policy import default as email_policy
from typing import Any

from pydantic import Field

from eddi_rag.config import IngestionSource
from eddi_rag.errors import EddiRagError
from eddi_rag.ingest.loaders.mail import header
from eddi_rag.sources.base import (
    Connector,
    CursorExpiredError,
    Globs,
    Item,
    Settings,
    Sink,
    SourceContext,
    SyncEnd,
    cursor_part,
    gone,
    holding,
    secret,
)

HEADERS = "BODY.PEEK[HEADER.FIELDS (MESSAGE-ID FROM SUBJECT DATE)]"
BATCH = 500  # UIDs per FETCH of headers


class ImapSettings(Settings):
    """The mails of a mailbox's folders over IMAP, each with its attachments ."""

    host: str = Field(min_length=1, description="The IMAP server. The outbound guard checks it.")
    port: int = Field(993, ge=1, le=65535)
    useTls: bool = Field(True, description="IMAP over TLS (port 993); false: plain IMAP (143), for a server on a trusted network only.")
    username: str = Field(min_length=1)
    password: str | None = secret("A secret reference (${vault:KEY}) to the mailbox's password (or an app password).")
    folders: Globs = Field(default_factory=lambda: ["INBOX"], min_length=1, description="The folders whose mails are documents.")
    senders: Globs = Field(default_factory=list, description="Only mails from these addresses (a@example.com) or domains (@example.com); none: every mail.")



class ImapSourceError(EddiRagError, ValueError):
    status = 400


PORTS = "IMAP listens on port 993 with TLS (useTls: true) or on 143 without (useTls: false)"


def _why(e: OSError, spec: ImapSettings) -> str:
    """What to check when the server could not be reached, by how it failed."""
    if isinstance(e, ConnectionRefusedError):
        return f". Nothing listens on port {spec.port} of {spec.host}: {PORTS}; check host, port and useTls"
    if isinstance(e, TimeoutError):
        return f". {spec.host} did not answer on port {spec.port}: a firewall may drop it, or the port is wrong ({PORTS})"
    if "ssl" in type(e).__name__.lower() or "SSL" in str(e):
        return f". TLS failed on port {spec.port}: {PORTS}; a port without TLS needs useTls: false"
    return ""


REACH = f"correct the source's host, port and useTls ({PORTS}) on its card in Configuration"
LOGIN = "correct the source's username, or store the mailbox's password in the vault under the key its password field names"


def _connect(ctx: SourceContext, spec: ImapSettings) -> Any:
    from imapclient import IMAPClient
    from imapclient.exceptions import IMAPClientError

    ctx.outbound.check_host(spec.host, spec.port, "imap.host")
    password = ctx.resolve(spec.password) if spec.password else ""
    try:
        client = IMAPClient(spec.host, port=spec.port, ssl=spec.useTls, timeout=30)
    except OSError as e:
        raise ImapSourceError(f"imap: cannot connect to {spec.host}:{spec.port} ({type(e).__name__}: {e}){_why(e, spec)}").fixed_by(REACH) from None
    try:
        client.login(spec.username, password)
    except IMAPClientError as e:
        client.shutdown()
        raise ImapSourceError(f"imap: {spec.host} refused the login of {spec.username!r}: {e}").fixed_by(LOGIN) from None
    return client


def _sender_allowed(sender: str, senders: list[str]) -> bool:
    if not senders:
        return True
    address = email.utils.parseaddr(sender)[1].lower()
    domain = address.rpartition("@")[2]
    return any(address == s.lower() or s.lower().lstrip("@") == domain for s in senders)


def _document_id(source_id: str, folder: str, message_id: str, validity: int, uid: int) -> str:
    key = message_id.strip() or f"uid:{validity}:{uid}"
    return f"{source_id}/{folder}/{hashlib.sha256(key.encode()).hexdigest()[:20]}"


def _title(subject: str) -> str:
    return re.sub(r"[/\\\x00-\x1f]+", " ", subject).strip()[:120] or "(no subject)"


class ImapConnector(Connector[ImapSettings]):
    type = "imap"
    configuration = ImapSettings
    needs = "an IMAP server, a mailbox's user name and its password (or app password) in the vault"

    def where(self, source: IngestionSource) -> str:
        spec = self.spec(source)
        return f"mail {spec.username}@{spec.host} {', '.join(spec.folders)}"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        ctx.outbound.check_host(self.spec(source).host, self.spec(source).port, "imap.host")

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        client = _connect(ctx, self.spec(source))
        try:
            for folder in self.spec(source).folders:
                client.select_folder(folder, readonly=True)
        finally:
            client.logout()

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink: Sink) -> SyncEnd:
        spec = self.spec(source)
        before = cursor_part(cursor, "folders", "imap")
        if before is not None and sorted(before) != sorted(spec.folders):
            raise CursorExpiredError("the source's folders changed since the cursor")
        client = _connect(ctx, spec)
        after: dict[str, Any] = {}
        try:
            for folder in spec.folders:
                seen = self._folder(ctx, client, source, folder, (before or {}).get(folder), sink)
                if seen is None:
                    return SyncEnd(False, None, ["the sink stopped the sync"], None)
                after[folder] = seen
        finally:
            client.logout()
        return SyncEnd(True, cursor=json.dumps({"folders": after}, sort_keys=True))

    def _folder(self, ctx: SourceContext, client: Any, source: IngestionSource, folder: str, before: dict[str, Any] | None,
                sink: Sink) -> dict[str, Any] | None:
        """Tell ``sink`` one folder's mails (from ``before``, its part of the cursor); returns its part of the next
        cursor, None when the sink stopped."""
        spec, sid = self.spec(source), source.effective_id
        try:
            validity = int(client.select_folder(folder, readonly=True)[b"UIDVALIDITY"])
        except Exception as e:  # noqa: BLE001 - the server's word on the folder
            raise ImapSourceError(f"imap.folders: cannot open {folder!r}: {e}").fixed_by(
                "name the folders as the mailbox lists them (INBOX, or a path such as Archive/2026) in the source's folders") from None
        if before is not None and before.get("validity") != validity:
            raise CursorExpiredError(f"folder {folder!r} was renumbered (UIDVALIDITY {before.get('validity')} → {validity})")
        known: dict[str, str] = dict((before or {}).get("seen", {}))
        current = sorted(int(u) for u in client.search("ALL"))
        new = [u for u in current if str(u) not in known]
        found: dict[int, tuple[str, str, int, str]] = {}  # uid: (document id or "" when left out, subject, size, version)
        for start in range(0, len(new), BATCH):
            fetched = client.fetch(new[start:start + BATCH], [HEADERS, "RFC822.SIZE"])
            for uid, data in fetched.items():
                head = _header(data)
                taken = _sender_allowed("".join(header(head, "From")[:1]), spec.senders)
                message_id, size = str(head.get("Message-ID", "")).strip(), int(data.get(b"RFC822.SIZE", 0))
                document_id = _document_id(sid, folder, message_id, validity, uid) if taken else ""
                version = (hashlib.sha256(f"{message_id}\0{size}\0{head.get('Date', '')}".encode()).hexdigest()[:24]
                           if message_id else f"{validity}:{uid}")  # (the same mail renumbered: not read again)
                found[uid] = (document_id, "".join(header(head, "Subject")[:1]), size, version)
        present = {known[str(u)] for u in current if str(u) in known} | {f[0] for f in found.values()}
        for uid, document_id in known.items():
            if int(uid) not in current and document_id and document_id not in present:
                sink.deleted(document_id)
        for document_id in dict.fromkeys(known[str(u)] for u in current if str(u) in known):
            if document_id:
                sink.unchanged(document_id)
        for uid in new:
            document_id, subject, size, version = found.get(uid, ("", "", 0, ""))
            if not document_id:
                continue
            if ctx.max_bytes is not None and size > ctx.max_bytes:
                sink.error(document_id, f"{size:,} bytes, over the limit of {ctx.max_bytes:,} (settings.maxBytesPerPage or EDDI_RAG_MAX_UPLOAD_MB): not read")
                continue
            item = Item(document_id, f"{folder}/{_title(subject)}.eml", _reader(client, uid), version=version,
                        media_type="message/rfc822", metadata={"folder": folder})
            if not sink.document(item):
                return None
        return {"validity": validity, "seen": {str(u): (known.get(str(u)) or found.get(u, ("",))[0]) for u in current}}

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        """A mail fetched alone (a retry): its folder searched for the UID whose Message-ID gives this id."""
        spec = self.spec(source)
        folder = document_id.removeprefix(f"{source.effective_id}/").rsplit("/", 1)[0]
        client = _connect(ctx, spec)
        try:
            validity = int(client.select_folder(folder, readonly=True)[b"UIDVALIDITY"])
            uids = sorted(int(u) for u in client.search("ALL"))
            for uid, data in client.fetch(uids, [HEADERS]).items() if uids else []:
                head = _header(data)
                if _document_id(source.effective_id, folder, str(head.get("Message-ID", "")), validity, uid) == document_id:
                    body, _ = _reader(client, uid)()
                    return Item(document_id, name, holding(body, "message/rfc822"), version=f"{validity}:{uid}",
                                media_type="message/rfc822", metadata={"folder": folder})
        finally:
            client.logout()
        return gone(name, document_id)


def _header(data: dict[bytes, Any]) -> Any:
    """The header fields a FETCH of HEADERS answered for one mail, parsed."""
    return BytesHeaderParser(policy=email_policy).parsebytes(
        next((v for k, v in data.items() if k.startswith(b"BODY[HEADER")), b""))


def _reader(client: Any, uid: int) -> Callable[[], tuple[bytes, str | None]]:
    def fetch() -> tuple[bytes, str | None]:
        data = client.fetch([uid], ["BODY.PEEK[]"]).get(uid, {})
        body = data.get(b"BODY[]")
        if body is None:
            raise ImapSourceError(f"imap: message UID {uid} is no longer in its folder")
        return bytes(body), "message/rfc822"
    return fetch


CONNECTOR = ImapConnector()
