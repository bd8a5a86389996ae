"""Request bodies that are files: size-limited, type-detected, raw or ``multipart/form-data``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from fastapi import Request
from starlette.datastructures import UploadFile

from eddi_rag.common.jsonvalues import text_problem
from eddi_rag.errors import EddiRagError

MAX_FILES = 100  # file parts in one multipart request


class PayloadTooLargeError(EddiRagError, ValueError):
    """A body over the upload limit (HTTP 413)."""
    status = 413


class BadUploadError(EddiRagError, ValueError):
    """A malformed upload (HTTP 400)."""
    status = 400


@dataclass(frozen=True)
class Upload:
    name: str
    data: bytes
    format: str
    acl: str | None = None  # the form's ``acl`` field: who may read it (comma-separated principals)


def too_large(what: str, limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"{what} is larger than the upload limit of {limit} bytes "
                                f"({limit / 1024 / 1024:g} MB; EDDI_RAG_MAX_UPLOAD_MB)")


async def read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused as soon as it passes ``limit`` (nothing more is read)."""
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        raise too_large("the request body", limit)
    pieces, size = [], 0
    async for piece in request.stream():
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            raise too_large("the request body", limit)
    return b"".join(pieces)  # (one copy: a bytearray grown and then copied made two)


def is_multipart(request: Request) -> bool:
    return request.headers.get("content-type", "").lower().startswith("multipart/form-data")


def naming(error: Exception, document: str) -> Exception:
    """``error``, knowing the file it refuses (its ``document``: what the ingestion history lists it as)."""
    error.document = document  # type: ignore[attr-defined]
    return error


async def read_multipart(request: Request, limit: int, detect: Callable[[bytes, str | None, str], str]) -> list[Upload]:
    """Every ``file`` part, each within ``limit`` and of a type ``detect`` reads (the ingesting verb's), with the form's
    ``acl`` field; any refusal refuses them all (nothing is queued)."""
    form = await request.form(max_files=MAX_FILES, max_fields=100)
    try:
        files = [f for f in form.getlist("file") if isinstance(f, UploadFile)]
        if not files:
            raise BadUploadError("the multipart body has no 'file' part (send each file as a part named 'file')")
        uploads = []
        acl = form.get("acl")
        acl = acl if isinstance(acl, str) else None
        for i, f in enumerate(files):
            if wrong := text_problem(f.filename or "", f"the filename of file part {i + 1}", name=True):
                raise BadUploadError(wrong)
            name = (f.filename or "").strip() or "unnamed"
            if f.size is not None and f.size > limit:
                raise naming(too_large(f"file {name!r}", limit), name)
            data = await f.read()
            if len(data) > limit:
                raise naming(too_large(f"file {name!r}", limit), name)
            if not data.strip():
                raise naming(BadUploadError(f"file {name!r} is empty"), name)
            try:
                fmt = detect(data, f.content_type, name)
            except ValueError as e:
                raise naming(type(e)(f"file {name!r}: {e}"), name) from e
            uploads.append(Upload(name, data, fmt, acl))
        return uploads
    finally:
        await form.close()
