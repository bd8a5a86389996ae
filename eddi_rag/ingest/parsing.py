"""Untrusted files are parsed in a separate process under hard limits, so that no document can take
the server down: the child limits its own address space (``parse_memory_mb``) and CPU time
(``parse_cpu_seconds``) before it reads the file; the server kills it past ``parse_seconds`` of wall
time, or within a fraction of a second of a cancel. What it parsed comes back as parts (text +
citation metadata); pages and rows read so far come back as progress while it works. Zip-based
files are checked against the unzip limits before the child starts. The processes are started ahead of need
and parse many files each, one at a time (``parse_workers``).

Plain text and Markdown are only decoded (nothing to isolate): they are read in process, under the
same character limit. ``EDDI_RAG_ISOLATE=0`` reads everything in process (debugging only).

The child is ``python -m eddi_rag.ingest.parsing``; for each file, one JSON line (format, name, fit, limits, size),
then the file's bytes on stdin; JSON lines on stdout: ``{"progress": [unit, n]}``, then
``{"parts": [[text, metadata, markdown, headings, lines], ...]}`` or ``{"error": [kind, message]}``, with
``"retiring": true`` when it will take no other. A request with ``render`` ({page, width}) draws that page instead
(``render``): ``{"image": base64 PNG}``.
"""

from __future__ import annotations

import base64
import json
import os
import queue
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from eddi_rag.common.lifetime import die_with_parent, name_process
from eddi_rag.errors import READER, EddiRagError
from eddi_rag.ingest import loaders, pages, parse_workers
from eddi_rag.ingest.limits import MB, DocumentLimitError, DocumentLimits, Meter, check_zip
from eddi_rag.ingest.loaders import Part, UnreadableDocumentError, UnsupportedFileTypeError

IN_PROCESS = frozenset({"text", "markdown"})  # decoded, not parsed
POLL_SECONDS = 0.1  # how often the wait looks at cancel and the clock
_ERRORS: dict[str, type[EddiRagError]] = {"limit": DocumentLimitError, "unreadable": UnreadableDocumentError,
                                       "unsupported": UnsupportedFileTypeError, "missing": pages.PageNotFoundError}


class ParseCancelledError(Exception):
    """The parse was stopped because its job was cancelled."""


Report = Callable[[str, int], None]  # (unit, count read so far)


def parse(fmt: str, data: bytes, name: str, fit: dict[str, Any], limits: DocumentLimits,
          report: Report | None = None, cancelled: Callable[[], bool] = lambda: False,
          ocr: dict[str, Any] | None = None) -> list[Part]:
    """The parts of a file detected as ``fmt`` (``loaders.detect``). ``fit``: ``{"chars": n}`` or a token
    budget's spec (how table loaders pack rows); ``ocr``: how scans and images are read (``ingest.ocr.spec``).
    Raises UnreadableDocumentError (DocumentLimitError over a limit, naming its setting) or ParseCancelledError."""
    if fmt in IN_PROCESS or not limits.isolate:
        return _load(fmt, data, name, fit, limits, report, ocr)
    if fmt in loaders.ZIPPED:
        check_zip(data, limits, name, fmt.upper())  # before a process is even started
    answer = _Child(limits).run({"fmt": fmt, "name": name, "fit": fit, "ocr": ocr}, data, report, cancelled)
    return [Part(text, metadata, markdown, tuple(headings), tuple((t, tuple(b)) for t, b in lines))
            for text, metadata, markdown, headings, lines in answer["parts"]]


def render(fmt: str, data: bytes, name: str, page: int, width: int, limits: DocumentLimits) -> bytes:
    """Page ``page`` of a kept file as a PNG ``width`` pixels wide (``ingest.pages``), drawn under the parse limits.
    Raises PageNotFoundError, UnreadableDocumentError (DocumentLimitError over a limit)."""
    if not limits.isolate:
        return pages.draw(fmt, data, name, page, width, Meter(limits))
    answer = _Child(limits).run({"fmt": fmt, "name": name, "render": {"page": page, "width": width}}, data, None, lambda: False)
    return base64.b64decode(answer["image"])


def _load(fmt: str, data: bytes, name: str, fit: dict[str, Any], limits: DocumentLimits, report: Report | None,
          ocr: dict[str, Any] | None = None) -> list[Part]:
    """The loader under the document limits: a zip checked before it is inflated, pages and rows
    counted while read, the characters of what it read."""
    if fmt in loaders.ZIPPED:
        check_zip(data, limits, name, fmt.upper())
    meter = Meter(limits, report)
    parts = loaders.load(fmt, data, name, fits_of(fit), meter, ocr)
    meter.characters(sum(len(p.text) for p in parts))
    return parts


def fits_of(spec: dict[str, Any]) -> Callable[[str], bool]:
    """A ``fit`` spec as the function table loaders call: ``chunkSize`` characters, or tokens within a budget."""
    if "chars" in spec:
        size = int(spec["chars"])
        return lambda text: len(text) <= size
    from eddi_rag.ingest.tokens import budget_of

    budget = budget_of(spec["tokenizer"], int(spec["limit"]), spec.get("path"))
    return lambda text: budget.count(text) <= budget.limit


class _Child:
    def __init__(self, limits: DocumentLimits):
        self.limits = limits

    def run(self, request: dict[str, Any], data: bytes, report: Report | None, cancelled: Callable[[], bool]) -> dict[str, Any]:
        """The answer of a warm parse process (``parse_workers``) to ``request``: ``{"parts": ...}`` or
        ``{"image": ...}``; its error raised. The process goes back to the pool after an answer; cancelled, past
        its time, or dead, it is killed and another takes its place."""
        worker = parse_workers.take()
        done = False
        try:
            header = json.dumps({**request, "limits": asdict(self.limits), "size": len(data)}).encode() + b"\n"
            threading.Thread(target=_send, args=(worker.process.stdin, header, data), daemon=True).start()
            cpu_before = worker.cpu_seconds()
            deadline = time.monotonic() + self.limits.parse_seconds
            while True:
                if cancelled():
                    raise ParseCancelledError("cancelled while parsing")
                if time.monotonic() > deadline:
                    raise self.limits.over("parse_seconds", f"parsing took longer than {self.limits.parse_seconds} s")
                try:
                    line = worker.lines.get(timeout=POLL_SECONDS)
                except queue.Empty:
                    continue
                if line is None:  # the child ended without an answer
                    raise self._died(worker, cpu_before)
                message = json.loads(line)
                if "progress" in message:
                    if report is not None:
                        report(*message["progress"])
                    continue
                done = not message.get("retiring")
                if "parts" in message or "image" in message:
                    return dict(message)
                kind, text, *failure = message["error"]
                error = _ERRORS.get(kind, UnreadableDocumentError)(text)
                error.failure = failure[0] if failure else error.failure  # (what fixes it, as the child's error said)
                raise error
        finally:
            parse_workers.give_back(worker, reuse=done)

    def _died(self, worker: parse_workers.Worker, cpu_before: float) -> Exception:
        process = worker.process
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        cpu = usage.ru_utime + usage.ru_stime - cpu_before  # (this parse's: the process may have parsed others before)
        if process.returncode == -signal.SIGXCPU or (process.returncode == -signal.SIGKILL and cpu >= self.limits.parse_cpu_seconds - 0.5):
            return self.limits.over("parse_cpu_seconds", f"parsing used more than {self.limits.parse_cpu_seconds} s of CPU time")
        if process.returncode == -signal.SIGKILL:  # the kernel's OOM killer, or someone else
            return self.limits.over("parse_memory_mb", "the parser was killed (out of memory?)")
        last = worker.stderr_tail().strip().splitlines()[-1:] or [f"exit code {process.returncode}"]
        return UnreadableDocumentError(f"the parser stopped: {last[0][:300]}")


def _send(pipe: IO[bytes], header: bytes, data: bytes) -> None:
    try:
        pipe.write(header)
        pipe.write(data)
        pipe.flush()
    except (BrokenPipeError, OSError, ValueError):  # the child died (or was killed) before reading it all
        pass


# -- the child ---------------------------------------------------------------------------------

def _child() -> None:
    """A warm parse process: requests one at a time on stdin, each under its own limits, until stdin ends or it
    retires (after ``MAX_USES`` files, a parse over a limit, or grown past half its memory limit: its last answer
    says ``"retiring": true``)."""
    import resource

    die_with_parent()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the answer's channel; a library's prints go to stderr
    os.dup2(2, 1)

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, ensure_ascii=False) + "\n")
        out.flush()

    for uses in range(1, parse_workers.MAX_USES + 1):
        name_process(parse_workers.IDLE)
        header = sys.stdin.buffer.readline()
        if not header:
            return
        name_process(parse_workers.BUSY)
        request = json.loads(header)
        limits = DocumentLimits(**request["limits"])
        memory = limits.parse_memory_mb * MB
        resource.setrlimit(resource.RLIMIT_AS, (memory, resource.RLIM_INFINITY))
        used = resource.getrusage(resource.RUSAGE_SELF)  # (the parses before this one count towards RLIMIT_CPU too)
        resource.setrlimit(resource.RLIMIT_CPU, (int(used.ru_utime + used.ru_stime) + 1 + limits.parse_cpu_seconds,
                                                 resource.RLIM_INFINITY))
        answer = _answer(request, limits, sys.stdin.buffer.read(request["size"]), send)
        retiring = uses == parse_workers.MAX_USES or "error" in answer and answer["error"][0] == "limit" or \
            parse_workers.address_space() > memory // 2  # (grown: the next parse under this limit could fail early)
        send({**answer, "retiring": True} if retiring else answer)
        if retiring:
            return


def _answer(request: dict[str, Any], limits: DocumentLimits, data: bytes, send: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """One request's answer: the parts, the drawn page, or the error."""
    try:
        if "render" in request:
            drawn = pages.draw(request["fmt"], data, request["name"], int(request["render"]["page"]),
                               int(request["render"]["width"]), Meter(limits))
            return {"image": base64.b64encode(drawn).decode("ascii")}
        parts = _load(request["fmt"], data, request["name"], request["fit"], limits, lambda unit, n: send({"progress": [unit, n]}),
                      request.get("ocr"))
        return {"parts": [[p.text, p.metadata, p.markdown, list(p.headings), [list(line) for line in p.lines]] for p in parts]}
    except Exception as e:  # noqa: BLE001 - every failure answered, in its kind (_error)
        return {"error": _error(e, request["name"], limits)}


def _error(e: BaseException, name: str, limits: DocumentLimits) -> list[Any]:
    """A parse's failure as the child answers it: [kind, message, what fixes it (errors.FILE, READER...)]. A reader
    failing in a way none of ours says is likely this product's fault (READER), named with where it failed."""
    if isinstance(e, MemoryError):
        return ["limit", f"parsing needed more than {limits.parse_memory_mb} MB of memory "
                         f"(limit: {limits.setting('parse_memory_mb')}={limits.parse_memory_mb})"]
    if isinstance(e, DocumentLimitError):
        return ["limit", str(e)]
    if isinstance(e, UnreadableDocumentError):
        return ["unreadable", str(e), e.failure]
    if isinstance(e, UnsupportedFileTypeError):
        return ["unsupported", str(e)]
    if isinstance(e, pages.PageNotFoundError):
        return ["missing", str(e)]
    if isinstance(e, RecursionError):
        return ["unreadable", f"{name}: nested too deeply to read"]
    return ["unreadable", f"{name}: our reader failed on it ({type(e).__name__}: {str(e)[:300]}; at {_where(e)})", READER]


def _where(error: BaseException) -> str:
    """Where ``error`` was raised, for a report: the innermost frame's module file, line and function (no values)."""
    frame = traceback.extract_tb(error.__traceback__)[-1:] if error.__traceback__ else []
    return f"{Path(frame[0].filename).name}:{frame[0].lineno} in {frame[0].name}" if frame else "an unknown place"


if __name__ == "__main__":
    _child()
