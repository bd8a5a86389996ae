"""E-mail (``.eml``, RFC 5322; Python's ``email`` package): the message's body (plain text, else its HTML as
Markdown) under its subject, with the sender, recipients, date and subject as metadata on every chunk (``sender``,
``recipients``, ``sentAt`` in ISO 8601, ``subject``); each attachment read by its own format's loader (its type
detected as an upload's is) and cited inside the mail, ``mail.eml > report.pdf, page 2`` (``attachment``). An
attached mail is read the same way, its attachments cited ``mail.eml > forwarded.eml > a.pdf``, up to
``MAX_DEPTH`` mails deep. An attachment that cannot be read (an unsupported type, a corrupt file) is named in the
message's part and skipped, as is one over a document limit (a zip bomb), named with the limit; more attachments
than ``EDDI_RAG_MAX_ATTACHMENTS`` (the mails inside it included) refuse the whole mail before any is read."""

from __future__ import annotations

import binascii
import email
import email.policy
import email.utils
import quopri
from collections.abc import Callable
from dataclasses import replace
from email.message import EmailMessage, Message
from typing import Any

from eddi_rag.ingest import loaders
from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError, UnsupportedFileTypeError

MAX_DEPTH = 3  # mails inside mails


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter, ocr: dict[str, Any]) -> list[Part]:
    message = email.message_from_bytes(data, policy=email.policy.default)
    if not isinstance(message, EmailMessage) or not message.keys():
        raise UnreadableDocumentError(f"{name}: not a readable e-mail (no header lines)")
    return read(message, name, fits, meter, ocr)


def read(message: EmailMessage, name: str, fits: Callable[[str], bool], meter: Counter, ocr: dict[str, Any],
         depth: int = 1) -> list[Part]:
    """The parts of a parsed message: its own, then each attachment's."""
    about = _about(message)
    parts: list[Part] = []
    skipped: list[str] = []
    attachments = [(a.get_filename() or f"attachment-{n}", a) for n, a in enumerate(message.iter_attachments(), 1)]
    meter.count("attachments", len(attachments))  # before any is read: over the limit, the mail is refused naming it
    for file_name, attachment in attachments:
        try:
            found = _attachment(attachment, file_name, fits, meter, ocr, depth)
        except (UnsupportedFileTypeError, UnreadableDocumentError) as e:  # a limit's too: the mail goes on without it
            skipped.append(f"{file_name} ({str(e).split(': ', 1)[-1][:200]})")
            continue
        for part in found:
            inner = part.metadata.get("attachment")
            parts.append(replace(part, metadata={**part.metadata, **about,
                                                 "attachment": f"{file_name} > {inner}" if inner else file_name}))
    return [_own_part(message, about, [name for name, _ in attachments], skipped), *parts]


def _attachment(attachment: EmailMessage, file_name: str, fits: Callable[[str], bool], meter: Counter,
                ocr: dict[str, Any], depth: int) -> list[Part]:
    if attachment.get_content_type() == "message/rfc822":
        if depth >= MAX_DEPTH:
            raise UnreadableDocumentError(f"{file_name}: mails nested more than {MAX_DEPTH} deep are not read")
        inner = attachment.get_payload(0) if attachment.is_multipart() else None
        encoding = str(attachment.get("content-transfer-encoding", "")).strip().lower()
        if encoding in ("base64", "quoted-printable"):  # an attached mail sent encoded, as some clients do
            text = inner.get_payload() if isinstance(inner, EmailMessage) else attachment.get_payload()
            raw = (binascii.a2b_base64 if encoding == "base64" else quopri.decodestring)(str(text).encode("ascii", "replace"))
            inner = email.message_from_bytes(raw, policy=email.policy.default)
        if not isinstance(inner, EmailMessage):
            raise UnreadableDocumentError(f"{file_name}: an attached mail that cannot be read")
        return read(inner, file_name, fits, meter, ocr, depth + 1)
    payload = attachment.get_payload(decode=True)
    if not isinstance(payload, bytes) or not payload:
        raise UnreadableDocumentError(f"{file_name}: empty")
    fmt = loaders.detect(payload, attachment.get_content_type(), file_name)
    if fmt in loaders.ZIPPED:
        meter.zip(payload, file_name, fmt.upper())
    if fmt in ("mail", "msg") and depth >= MAX_DEPTH:
        raise UnreadableDocumentError(f"{file_name}: mails nested more than {MAX_DEPTH} deep are not read")
    return loaders.load(fmt, payload, file_name, fits, meter, ocr)


def header(message: Message, name: str) -> list[str]:
    """Each ``name`` header of ``message`` as text. A header written in raw 8-bit bytes (no RFC 2047 encoding, as old
    mailers send) is read as UTF-8, else as windows-1252 (where the email package gives U+FFFD for every such byte);
    one that is encoded is decoded by the email package."""
    out = []
    for key, raw in message.raw_items():
        if key.lower() != name.lower():
            continue
        if isinstance(raw, str) and any("\udc80" <= ch <= "\udcff" for ch in raw):
            data = raw.encode("utf-8", "surrogateescape")
            try:
                out.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                out.append(data.decode("cp1252", "replace"))
        else:
            out.append(str(message.policy.header_fetch_parse(key, raw)) if isinstance(raw, str) else str(raw))
    return out


def _about(message: EmailMessage) -> dict[str, Any]:
    """sender, recipients, sentAt, subject: what a mail's every chunk carries."""
    about: dict[str, Any] = {}
    if message.get("from"):
        about["sender"] = _addresses(message, "from")
    recipients = ", ".join(a for a in (_addresses(message, h) for h in ("to", "cc")) if a)
    if recipients:
        about["recipients"] = recipients
    try:
        when = email.utils.parsedate_to_datetime(str(message["date"])) if message.get("date") else None
    except (TypeError, ValueError):
        when = None
    if when is not None:
        about["sentAt"] = when.isoformat()
    if subject := "".join(header(message, "subject")[:1]):
        about["subject"] = " ".join(subject.split())
    return about


def _addresses(message: EmailMessage, name: str) -> str:
    values = header(message, name)
    return ", ".join(f"{n} <{a}>" if n and n != a else a or n for n, a in email.utils.getaddresses(values) if a or n)


def _body(message: EmailMessage) -> tuple[str, bool]:
    """(the body's text, whether it is Markdown: an HTML body converted)."""
    from eddi_rag.ingest.loaders.html import check_depth, to_markdown

    body = message.get_body(preferencelist=("plain", "html"))
    if body is None:
        return "", False
    try:
        content = body.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset: the bytes as UTF-8, replaced
        raw = body.get_payload(decode=True)
        content = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
    if body.get_content_type() == "text/html":
        check_depth(str(content), "the mail's HTML body")
        return to_markdown(str(content)), True
    return str(content).replace("\r\n", "\n").strip(), False


def _own_part(message: EmailMessage, about: dict[str, Any], names: list[str], skipped: list[str]) -> Part:
    text, is_markdown = _body(message)
    lines = [f"{label}: {about[key]}" for label, key in (("From", "sender"), ("To", "recipients"), ("Date", "sentAt"))
             if key in about]
    if names:
        lines.append(f"Attachments: {', '.join(names)}")
    if skipped:
        lines.append(f"Not read: {'; '.join(skipped)}")
    subject = about.get("subject") or "(no subject)"
    escaped = text if is_markdown else "\n".join("\\" + line if line.lstrip().startswith("#") else line for line in text.split("\n"))
    return Part(f"# {subject}\n\n" + "  \n".join(lines) + f"\n\n{escaped}".rstrip(), dict(about), markdown=True)
