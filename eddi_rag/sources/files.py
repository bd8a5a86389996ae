"""Uploaded files (EDDI's ``type: upload`` source, ``connectors/upload.py``): the server keeps the files and every run reads them,
so a change of model or chunking re-ingests from what is kept and a purge loses nothing. A file is known by
its name (re-uploading ``handbook.pdf`` replaces it): its id is derived from the name, and its document id
in the knowledge base is ``<source id>/<name>``. Limits (``upload``: maxFiles, maxFileBytes, maxTotalBytes)
are checked one file at a time under the database's write lock, so two uploads cannot share the same headroom.

``Files`` keeps the bytes and lists them for a run; ``UploadedFiles`` is what callers do with an
upload source's files: keep them (each within the limits, and only if it yields text), list them with their state
beside what the source ingested, delete one with its chunks."""

from __future__ import annotations

import builtins
import hashlib
import logging
import unicodedata
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from eddi_rag import state
from eddi_rag.config import IngestionSource, RagConfiguration, UploadSource
from eddi_rag.errors import EddiRagError
from eddi_rag.sources.base import FileNotFoundInSourceError, Item, Listing
from eddi_rag.sources.ledger import SourceLedger
from eddi_rag.sources.runs import PURGE, SourceRuns
from eddi_rag.state.sqlite import StateDatabase

if TYPE_CHECKING:
    from eddi_rag.ingest.pipeline import Ingestor


log = logging.getLogger(__name__)


class FileRefusedError(EddiRagError, ValueError):
    status = 400


def clean_name(name: str | None) -> str:
    """The last path segment of a client's file name, without control characters (``file`` when nothing is left)."""
    last = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
    last = "".join(ch for ch in last if unicodedata.category(ch)[0] != "C").strip()
    return last[:255] if last not in ("", ".", "..") else "file"


def file_id(name: str) -> str:
    """The id of the file called ``name`` (the same for the same name, whatever its Unicode form or case)."""
    return hashlib.sha256(unicodedata.normalize("NFC", clean_name(name)).lower().encode()).hexdigest()[:32]


def document_id(source_id: str, name: str) -> str:
    return f"{source_id}/{name}"


class Files:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def list(self, kb_id: str, source_id: str) -> list[dict[str, Any]]:
        rows = self.db.query("SELECT file_id, name, content_type, size, sha256, uploaded_at FROM source_files "
                             "WHERE kb_id=? AND source_id=? ORDER BY name", (kb_id, source_id))
        return [{"fileId": r["file_id"], "fileName": r["name"], "contentType": r["content_type"], "size": r["size"],
                 "sha256": r["sha256"], "uploadedAt": r["uploaded_at"]} for r in rows]

    def store(self, kb_id: str, source_id: str, limits: UploadSource, name: str, data: bytes,
              content_type: str | None) -> dict[str, Any]:
        """Keep ``data`` as the file ``name`` (replacing a file of that name); FileRefusedError over a limit."""
        name, fid = clean_name(name), file_id(name)
        if len(data) > limits.maxFileBytes:
            raise FileRefusedError(f"{name}: {len(data):,} bytes, more than upload.maxFileBytes ({limits.maxFileBytes:,})")
        digest = hashlib.sha256(data).hexdigest()
        now = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        with self.db.transaction() as conn:
            count, total = conn.execute(
                "SELECT COUNT(*), COALESCE(SUM(size), 0) FROM source_files WHERE kb_id=? AND source_id=? AND file_id<>?",
                (kb_id, source_id, fid)).fetchone()
            if count + 1 > limits.maxFiles:
                raise FileRefusedError(f"{name}: the source holds {count} files already (upload.maxFiles: {limits.maxFiles})")
            if total + len(data) > limits.maxTotalBytes:
                raise FileRefusedError(f"{name}: the source would hold {total + len(data):,} bytes "
                                       f"(upload.maxTotalBytes: {limits.maxTotalBytes:,})")
            conn.execute("INSERT INTO source_files VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(kb_id, source_id, file_id) "
                         "DO UPDATE SET name=excluded.name, content_type=excluded.content_type, size=excluded.size, "
                         "sha256=excluded.sha256, data=excluded.data, uploaded_at=excluded.uploaded_at",
                         (kb_id, source_id, fid, name, content_type, len(data), digest, data, now))
        return {"fileId": fid, "fileName": name, "contentType": content_type, "size": len(data), "sha256": digest,
                "uploadedAt": now}

    def get(self, kb_id: str, source_id: str, fid: str) -> dict[str, Any]:
        rows = self.db.query("SELECT name FROM source_files WHERE kb_id=? AND source_id=? AND file_id=?",
                             (kb_id, source_id, fid))
        if not rows:
            raise FileNotFoundInSourceError(f"source {source_id!r} of knowledge base {kb_id!r} has no file {fid!r}")
        return {"fileId": fid, "fileName": rows[0]["name"]}

    def delete(self, kb_id: str, source_id: str, fid: str) -> None:
        self.db.execute("DELETE FROM source_files WHERE kb_id=? AND source_id=? AND file_id=?", (kb_id, source_id, fid))

    def drop(self, kb_id: str, source_id: str) -> None:
        self.db.execute("DELETE FROM source_files WHERE kb_id=? AND source_id=?", (kb_id, source_id))

    def _read(self, kb_id: str, source_id: str, fid: str):
        def read() -> tuple[bytes, str | None]:
            rows = self.db.query("SELECT data, content_type FROM source_files WHERE kb_id=? AND source_id=? AND file_id=?",
                                 (kb_id, source_id, fid))
            if not rows:
                raise FileNotFoundInSourceError(f"the file {fid} was deleted during the run")
            return bytes(rows[0]["data"]), rows[0]["content_type"]
        return read

    def listing(self, kb_id: str, source_id: str) -> Listing:
        """Every file the source holds (complete: the files are all here)."""
        return Listing([Item(document_id(source_id, f["fileName"]), f["fileName"], self._read(kb_id, source_id, f["fileId"]),
                             version=f["sha256"], media_type=f["contentType"]) for f in self.list(kb_id, source_id)])


class NotAnUploadSourceError(EddiRagError, ValueError):
    """Files sent to a source that does not hold files (HTTP 409, as EDDI answers)."""
    status = 409


class UploadedFiles:
    def __init__(self, files: Files, ledger: SourceLedger, runs: SourceRuns, ingestor: Ingestor,
                 source: Callable[[str, str], tuple[RagConfiguration, IngestionSource]],
                 remove: Callable[[str, RagConfiguration, str, builtins.list[str]], int], redact: Callable[[str], str]):
        """``source(kb_id, source_id)``: the KB's configuration and that source; ``remove``: documents of a source
        taken out of the knowledge base and forgotten."""
        self.files, self.ledger, self.runs, self.ingestor, self.source, self.remove, self.redact = \
            files, ledger, runs, ingestor, source, remove, redact

    def source_of(self, kb_id: str, source_id: str) -> tuple[RagConfiguration, IngestionSource]:
        """The KB's configuration and its upload source ``source_id`` (409 for a source of another type)."""
        config, source = self.source(kb_id, source_id)
        if source.type != "upload":
            raise NotAnUploadSourceError(f"source {source.effective_id!r} of knowledge base {kb_id!r} is of type "
                                         f"{source.type!r}; files go to a source of type 'upload'")
        return config, source

    def list(self, kb_id: str, source_id: str) -> list[dict[str, Any]]:
        """The files an upload source holds, each with its state: Indexed, Changed (uploaded again since) or Not indexed."""
        _, source = self.source_of(kb_id, source_id)
        sid = source.effective_id
        known = self.ledger.known(kb_id, sid)
        out = []
        for f in self.files.list(kb_id, sid):
            doc = document_id(sid, f["fileName"])
            row = known.get(doc)
            status = "Not indexed" if row is None or row["status"] != "ok" else \
                "Changed" if f["uploadedAt"] > row["updated_at"] else "Indexed"  # uploaded again since it was ingested
            out.append({**f, "documentId": doc, "status": status})
        return out

    def store(self, kb_id: str, source_id: str, files: builtins.list[tuple[str, bytes, str | None]]) -> dict[str, Any]:
        """Keep each file that is within the source's limits and yields text: EDDI's ``{stored, rejected:
        [{fileName, reason}]}``; running the source ingests them."""
        config, source = self.source_of(kb_id, source_id)
        stored: list[dict[str, Any]] = []
        rejected: list[dict[str, str]] = []
        for name, data, content_type in files:
            try:
                if len(data) > source.upload.maxFileBytes:  # before parsing anything
                    raise FileRefusedError(f"{len(data):,} bytes, more than upload.maxFileBytes "
                                                  f"({source.upload.maxFileBytes:,})")
                self.ingestor.readable(config, clean_name(name), data, content_type)
                stored.append(self.files.store(kb_id, source.effective_id, source.upload, name, data, content_type))
            except Exception as e:  # noqa: BLE001 - each file is accepted or refused on its own
                if not isinstance(e, (EddiRagError, ValueError)):
                    log.warning("upload of %s refused: %s", name, e)
                rejected.append({"fileName": clean_name(name), "reason": self.redact(str(e) or type(e).__name__)})
        return {"stored": stored, "rejected": rejected}

    def delete(self, kb_id: str, source_id: str, file_id: str) -> dict[str, Any]:
        """Remove a file and its chunks now (its chunks first: a store that fails keeps the file, to try again)."""
        config, source = self.source_of(kb_id, source_id)
        sid = source.effective_id
        f = self.files.get(kb_id, sid, file_id)
        claim = self.runs.begin(kb_id, sid, PURGE)
        try:
            self.remove(kb_id, config, sid, [document_id(sid, f["fileName"])])
            self.files.delete(kb_id, sid, file_id)
        finally:
            self.runs.end_claim(claim)
        return {"status": "deleted", "fileId": file_id, "fileName": f["fileName"], "sourceId": sid}

