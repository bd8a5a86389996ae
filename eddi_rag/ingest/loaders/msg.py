"""Outlook messages (``.msg``, an OLE compound file; read by aspose-email-foss, MIT-licensed and pure Python, into
an RFC 5322 message): then read as an ``.eml`` is (``loaders.mail``): body, sender, recipients, date, subject,
each attachment cited ``mail.msg > report.pdf``."""

from __future__ import annotations

import email
import email.policy
import os
import tempfile
from collections.abc import Callable
from email.message import EmailMessage
from typing import Any

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError
from eddi_rag.ingest.loaders.mail import read


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter, ocr: dict[str, Any]) -> list[Part]:
    from aspose.email_foss import msg

    handle, path = tempfile.mkstemp(suffix=".msg")  # its reader takes a path
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        try:
            with msg.MapiMessage.from_file(path) as message:
                raw = message.to_email_bytes()
        except Exception as e:  # noqa: BLE001 - whatever the compound-file reader raises is the file's problem
            raise UnreadableDocumentError(f"{name}: corrupt or unreadable Outlook message ({type(e).__name__}: {e})") from e
    finally:
        os.unlink(path)
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    if not isinstance(parsed, EmailMessage):
        raise UnreadableDocumentError(f"{name}: an Outlook message that cannot be read")
    return read(parsed, name, fits, meter, ocr)
