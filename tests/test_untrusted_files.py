"""Documents that cannot take the server down (issue 19): untrusted files are parsed in a separate
process under hard limits, zip-based files are checked before they are inflated, one document has
limits on pages, rows, characters and chunks, and cancel stops the work and stays cancelled.

The hostile files are built here (small on disk, huge when inflated or parsed); the server is a real
``eddi-rag serve`` process on 127.0.0.1 whose memory is sampled while it works."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
import pytest

from eddi_rag.ingest import parse_workers
from eddi_rag.ingest.limits import DocumentLimitError, DocumentLimits
from eddi_rag.ingest.loaders import UnreadableDocumentError
from eddi_rag.ingest.parsing import ParseCancelledError, parse
from tests.support import bombs, files
from tests.support.ports import free_port
from tests.support.serving import wait_until_healthy
from tests.support.waiting import until

MB = 1024 * 1024
PARSE_MEMORY_MB = 512
KB = {"name": "Uploads", "embeddingProvider": "local", "storeType": "sqlite"}
CHARS = {"chars": 512}


def parse_children(pid: int) -> list[psutil.Process]:
    """The server's parse processes at work (the warm ones waiting for a file are named otherwise: parse_workers)."""
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if p.name() == parse_workers.BUSY]
    except psutil.Error:
        return []


class Server:
    """``eddi-rag serve`` in its own process, its resident memory sampled every 50 ms."""

    def __init__(self, data_dir: Path, **env: str):
        self.data_dir, self.env = data_dir, {**os.environ, **env}
        self.peak = 0
        self.child_peak = 0
        self.client = httpx.Client(timeout=60)  # (one for its requests: httpx.request makes a client, and its TLS context, each call)

    def start(self) -> Server:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen([sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(self.port),
                                         "--data-dir", str(self.data_dir)], env=self.env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until_healthy(self.url, self.process)
        self._sampling = True
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        return self

    def _sample(self) -> None:
        me = psutil.Process(self.process.pid)
        while self._sampling:
            try:
                self.peak = max(self.peak, me.memory_info().rss)
                for child in parse_children(self.process.pid):
                    self.child_peak = max(self.child_peak, child.memory_info().rss)
            except psutil.Error:
                pass
            time.sleep(0.05)

    def request(self, method: str, path: str, **kwargs) -> httpx.Response:
        return self.client.request(method, self.url + path, **kwargs)

    def kill(self) -> None:
        self._sampling = False
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        self._sampling = False
        self.client.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()


@pytest.fixture
def serve(tmp_path):
    started: list[Server] = []

    def start(**env: str) -> Server:
        server = Server(tmp_path / "data", **env).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def kb_of(server: Server) -> str:
    created = server.request("POST", "/ragstore/rags", json=KB)
    assert created.status_code == 201, created.text
    return created.headers["location"].split("/")[-1].split("?")[0]


def ingest(server: Server, kb: str, name: str, data: bytes) -> str:
    r = server.request("POST", f"/ragstore/rags/{kb}/ingest", params={"documentName": name}, content=data,
                       headers={"Content-Type": "application/octet-stream"})
    assert r.status_code == 202, r.text
    return r.json()["ingestionId"]


def status(server: Server, kb: str, job: str) -> dict:
    return server.request("GET", f"/ragstore/rags/{kb}/ingestion/{job}/status").json()


# --- the server, attacked ------------------------------------------------------------------------

@pytest.mark.integration
def test_hostile_files_fail_with_their_reason_while_the_server_stays_small_and_answers(serve):
    server = serve(EDDI_RAG_PARSE_MEMORY_MB=str(PARSE_MEMORY_MB), EDDI_RAG_MAX_ROWS="50000")
    kb = kb_of(server)
    hostile = [("bomb.docx", bombs.docx_inflating_to(1024), "EDDI_RAG_MAX_ZIP_ENTRY_MB=256"),  # ~1 MB, 1 GB inflated
               ("liar.docx", bombs.docx_lying_about_its_size(64), "Bad CRC-32"),  # declares 1 KB, inflates to 64 MB
               ("rows.csv", bombs.csv_rows(1_000_000), "EDDI_RAG_MAX_ROWS=50000"),
               ("rows.xlsx", bombs.xlsx_rows(1_000_000), "EDDI_RAG_MAX_ROWS=50000"),
               ("deep.html", bombs.nested_html(20), "more than 255 levels deep")]
    health: list[int] = []
    for name, data, reason in hostile:
        job = ingest(server, kb, name, data)

        def ended():
            health.append(server.request("GET", "/health").status_code)
            found = status(server, kb, job)
            return found if found["status"] not in ("pending", "processing") else None

        ended_as = until(ended, f"{name} to end")
        assert ended_as["status"].startswith("failed: ") and reason in ended_as["status"], (name, ended_as)
    exported = server.request("POST", "/backup/import", content=bombs.eddi_export_with_description(190),
                              headers={"Content-Type": "application/zip"})
    assert exported.status_code == 400 and "bomb.descriptor.json" in exported.json()["error"], exported.text
    assert server.request("GET", "/agentstore/agents/descriptors").json() == []
    assert set(health) == {200} and len(health) >= len(hostile)
    assert server.request("GET", f"/ragstore/rags/{kb}/documents").json()["documents"] == []
    print(f"server peak RSS {server.peak / MB:.0f} MB, parse process peak {server.child_peak / MB:.0f} MB")
    assert server.peak < PARSE_MEMORY_MB * MB


@pytest.mark.integration
def test_cancel_kills_the_parse_and_stays_cancelled_across_kill_9(serve):
    server = serve(EDDI_RAG_MAX_ROWS="2000000")
    kb = kb_of(server)
    slow = bombs.xlsx_rows(400_000)  # a real spreadsheet under the limits: seconds of parsing
    first, second = ingest(server, kb, "first.xlsx", slow), ingest(server, kb, "second.xlsx", slow)
    parsing = until(lambda: (s := status(server, kb, first)).get("progress", {}).get("done") and s, "parse progress")
    assert parsing["progress"]["phase"] == "parsing" and parsing["progress"]["unit"] == "rows"
    children = until(lambda: parse_children(server.process.pid), "the parse process")
    for job in (first, second):  # processing; the second too, or pending (two ingestion workers)
        cancelled = server.request("DELETE", f"/ragstore/rags/{kb}/ingestion/{job}")
        assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
    _, alive = psutil.wait_procs(children, timeout=10)
    assert not alive, "the parse process was not killed"
    until(lambda: not parse_children(server.process.pid), "every parse process to end")
    # cancelled, then the server dies at once: the next one never runs it
    third = ingest(server, kb, "third.xlsx", slow)
    until(lambda: status(server, kb, third)["status"] == "processing", "the third job to start")
    (child,) = until(lambda: parse_children(server.process.pid), "the third parse process")
    assert server.request("DELETE", f"/ragstore/rags/{kb}/ingestion/{third}").json()["status"] == "cancelled"
    server.kill()
    gone, _ = psutil.wait_procs([child], timeout=10)
    assert gone, "the parse process outlived the server"
    server = serve(EDDI_RAG_MAX_ROWS="2000000")
    for _ in range(10):  # the worker has started and looked at what the dead server left
        jobs = server.request("GET", f"/ragstore/rags/{kb}/ingestions").json()
        assert {j["ingestionId"]: j["status"] for j in jobs} == dict.fromkeys((first, second, third), "cancelled")
        assert not parse_children(server.process.pid)
        time.sleep(0.1)
    assert server.request("GET", f"/ragstore/rags/{kb}/documents").json()["documents"] == []
    # a cancelled job can be run again on purpose
    assert server.request("POST", f"/ragstore/rags/{kb}/ingestion/{second}/retry").json()["status"] == "pending"


@pytest.mark.integration
def test_deleting_a_knowledge_base_cancels_its_ingestions(serve):
    server = serve(EDDI_RAG_MAX_ROWS="2000000")
    kb = kb_of(server)
    job = ingest(server, kb, "slow.xlsx", bombs.xlsx_rows(400_000))
    (child,) = until(lambda: parse_children(server.process.pid), "the parse process")
    assert server.request("DELETE", f"/ragstore/rags/{kb}", params={"permanent": "true"}).status_code == 200
    gone, _ = psutil.wait_procs([child], timeout=10)
    assert gone, "the parse process of a deleted knowledge base goes on"
    server.stop()
    import sqlite3

    with sqlite3.connect(server.data_dir / "eddi-rag.db") as db:
        assert db.execute("SELECT status FROM ingestion_jobs WHERE id=?", (job,)).fetchone() == ("cancelled",)


# --- each limit names its setting --------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("fmt,data,limits,reason", [
    ("pdf", lambda: files.pdf(["One.", "Two.", "Three."]), {"max_pages": 2}, "the document has 3 pages (limit: EDDI_RAG_MAX_PAGES=2)"),
    ("pptx", lambda: files.pptx([("A", "a"), ("B", "b")]), {"max_pages": 1}, "the document has 2 pages (limit: EDDI_RAG_MAX_PAGES=1)"),
    ("csv", lambda: bombs.csv_rows(20), {"max_rows": 10}, "more than 10 rows (limit: EDDI_RAG_MAX_ROWS=10)"),
    ("xlsx", lambda: bombs.xlsx_rows(20), {"max_rows": 10}, "more than 10 rows (limit: EDDI_RAG_MAX_ROWS=10)"),
    ("text", lambda: b"x" * 2000, {"max_chars": 1000}, "2,000 characters (limit: EDDI_RAG_MAX_CHARS=1000)"),
    ("docx", lambda: bombs.docx_inflating_to(3), {"max_unzipped_mb": 2}, "(limit: EDDI_RAG_MAX_UNZIPPED_MB=2)"),
    ("docx", lambda: bombs.docx_inflating_to(3), {"max_zip_entry_mb": 2}, "'word/document.xml' unpacks to 3.0 MB (limit: EDDI_RAG_MAX_ZIP_ENTRY_MB=2)"),
    ("xlsx", lambda: bombs.xlsx_rows(10), {"max_zip_entries": 3}, "(limit: EDDI_RAG_MAX_ZIP_ENTRIES=3)"),
    ("docx", lambda: bombs.docx_inflating_to(400), {"parse_memory_mb": 256, "max_zip_entry_mb": 1024, "max_unzipped_mb": 1024},
     "parsing needed more than 256 MB of memory (limit: EDDI_RAG_PARSE_MEMORY_MB=256)"),
    ("xlsx", lambda: bombs.xlsx_rows(600_000), {"parse_cpu_seconds": 1, "max_rows": 10**7},
     "parsing used more than 1 s of CPU time (limit: EDDI_RAG_PARSE_CPU_SECONDS=1)"),
    ("xlsx", lambda: bombs.xlsx_rows(600_000), {"parse_seconds": 1, "max_rows": 10**7},
     "parsing took longer than 1 s (limit: EDDI_RAG_PARSE_SECONDS=1)"),
])
def test_a_document_over_a_limit_fails_naming_the_limit_and_its_setting(fmt, data, limits, reason):
    with pytest.raises(DocumentLimitError) as e:
        parse(fmt, data(), "f", CHARS, DocumentLimits(**limits))
    assert reason in str(e.value)


def test_chunks_of_one_document_are_limited(runtime):
    from dataclasses import replace

    kb = runtime.resources.create("rags", {**KB, "chunkStrategy": "recursive", "chunkSize": 100, "chunkOverlap": 0}).id
    runtime.ingestor.limits = replace(runtime.ingestor.limits, max_chunks=5)
    with pytest.raises(DocumentLimitError, match=r"makes \d+ chunks \(limit: EDDI_RAG_MAX_CHUNKS=5\)"):
        runtime.ingest(kb, "long.txt", "A sentence of some length. " * 100)
    assert runtime.documents.list(kb)["documents"] == []


def parse_processes() -> dict[str, set[int]]:
    """This process's parse processes by what they do: {"idle": pids, "busy": pids}."""
    found: dict[str, set[int]] = {"idle": set(), "busy": set()}
    for p in psutil.Process().children():
        try:
            kind = {parse_workers.IDLE: "idle", parse_workers.BUSY: "busy"}.get(p.name())
        except psutil.Error:
            continue
        if kind:
            found[kind].add(p.pid)
    return found


@pytest.mark.integration
def test_parse_processes_are_started_ahead_and_parse_many_files_each_under_each_file_s_limits():
    parse_workers.close()  # (a pool of this test's own)
    document = files.docx([("h1", "Refunds"), ("p", "Refunds take five days.")])
    assert [p.text for p in parse("docx", document, "a.docx", CHARS, DocumentLimits())] == ["# Refunds\n\nRefunds take five days."]
    two_idle = lambda: (found := parse_processes()["idle"]) and len(found) == 2 and found  # noqa: E731
    warm = until(two_idle, "two idle parse processes")
    for _ in range(5):  # (each with a CPU limit of 1 s: counted from where the process stands, not from its start)
        assert parse("docx", document, "a.docx", CHARS, DocumentLimits(parse_cpu_seconds=1))
    # (a process names itself idle just after its answer: wait for that, then they are the same two)
    assert until(two_idle, "two idle parse processes") == warm, "a parse started a process while two were idle"
    # a parse over a limit: its process ends, another takes its place, and the next file is read
    with pytest.raises(DocumentLimitError, match="EDDI_RAG_PARSE_CPU_SECONDS=1"):
        parse("xlsx", bombs.xlsx_rows(600_000), "f", CHARS, DocumentLimits(parse_cpu_seconds=1, max_rows=10**7))
    assert parse("docx", document, "a.docx", CHARS, DocumentLimits())
    after = until(two_idle, "two idle parse processes again")
    assert len(after - warm) == 1 and not parse_processes()["busy"]
    # cancelled: the process parsing is killed at once, and a fresh one is kept ready
    started = time.monotonic()
    with pytest.raises(ParseCancelledError):
        parse("xlsx", bombs.xlsx_rows(200_000), "f", CHARS, DocumentLimits(), cancelled=lambda: time.monotonic() > started + 0.3)
    assert not parse_processes()["busy"]
    until(two_idle, "two idle parse processes after the cancel")
    parse_workers.close()
    assert parse_processes() == {"idle": set(), "busy": set()}


def test_a_parse_process_that_cannot_be_started_fails_the_parse_instead_of_waiting(monkeypatch):
    def out_of_processes():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    pool = parse_workers.Pool(0)
    monkeypatch.setattr(parse_workers, "Worker", out_of_processes)
    try:
        with pytest.raises(BlockingIOError, match="Resource temporarily unavailable"):
            pool.take()
    finally:
        pool.close()


def test_the_warm_parse_processes_setting_is_checked(monkeypatch):
    monkeypatch.setenv("EDDI_RAG_PARSE_WORKERS", "many")
    with pytest.raises(ValueError, match="EDDI_RAG_PARSE_WORKERS must be a whole number of processes.*'many'"):
        parse_workers.kept_warm()


@pytest.mark.integration
def test_a_cancelled_parse_stops_and_a_corrupt_file_is_unreadable():
    started = time.monotonic()
    with pytest.raises(ParseCancelledError):
        parse("xlsx", bombs.xlsx_rows(200_000), "f", CHARS, DocumentLimits(), cancelled=lambda: time.monotonic() > started + 0.3)
    with pytest.raises(UnreadableDocumentError, match="Bad CRC-32"):
        parse("docx", bombs.docx_lying_about_its_size(8), "liar.docx", CHARS, DocumentLimits())


def test_limits_come_from_the_environment_and_bad_values_are_named():
    limits = DocumentLimits.from_env({"EDDI_RAG_MAX_ROWS": "7", "EDDI_RAG_ISOLATE": "0"})
    assert limits.max_rows == 7 and not limits.isolate and limits.max_pages == DocumentLimits().max_pages
    for bad in ({"EDDI_RAG_MAX_ROWS": "lots"}, {"EDDI_RAG_PARSE_MEMORY_MB": "0"}, {"EDDI_RAG_PARSE_MEMORY_MB": "100"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            DocumentLimits.from_env(bad)


def test_an_eddi_export_is_checked_like_a_body(runtime):
    import io
    import zipfile

    from eddi_rag.verbs.eddi_import import ExportError, import_agent_export

    def export(**entries: bytes) -> bytes:
        out = io.BytesIO()
        with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in entries.items():
                z.writestr(name, data)
        return out.getvalue()

    refused = [(export(**{"a.agent.json": b'{"workflows": [], "name": "x\\u0000"}'}), "a.agent.json.name: NUL"),
               (export(**{"a.agent.json": b'{"workflows": [], "n\\ud800": 1}'}), "a lone surrogate"),
               (export(**{"a.agent.json": b'{"workflows": []}', "a.descriptor.json": b'{"description": "' + b"d" * 10_001 + b'"}'}),
                "10,001 characters"),
               (bombs.eddi_export_with_description(20), "may unpack to at most 16 MB")]
    for data, reason in refused:
        with pytest.raises(ExportError, match=reason):
            import_agent_export(runtime.resources, data, checked=runtime.knowledge_bases.checked)
    assert runtime.resources.ids("agents") == []
