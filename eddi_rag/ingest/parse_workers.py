"""Warm parse processes: ``python -m eddi_rag.ingest.parsing`` started ahead of need and given one file at a time.

Starting a process that imports the parsers costs more than parsing a small file (0.4 s against 0.03 s for a small
DOCX here; 1.5 to 2 s on a busy machine), so a few are kept started (``EDDI_RAG_PARSE_WORKERS``, default 2; 0 starts
one per file, as before) and each parses many files. Each parse keeps its own limits: the child sets its address
space and CPU time (counted from where it stands) before reading the file, the parent kills it past its wall time
or on a cancel, and a fresh process takes its place. A process retires after ``MAX_USES`` files, after a parse over
a limit, or once it has grown past half its memory limit, so no parse inherits much of another's.

Every process is started by one long-lived thread: Linux's parent-death signal (``common.lifetime.die_with_parent``) fires
when the *thread* that started a child ends, so a child started by a request's thread would die with it. A process
is named ``ragparse-idle`` while it waits and ``ragparse-busy`` while it parses (``ps``, ``/proc/<pid>/comm``): never
a name with ``eddi-rag`` in it, which an operator's ``pgrep``/``pkill`` takes for the server.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import IO

MAX_USES = 200  # files one process parses before it retires
# (no "eddi-rag" in them: ``pgrep -n eddi-rag``, an operator's way to the server, found a warm parse process, and the
# SIGTERM meant for the server stopped it instead: issue 56, finding 8)
IDLE, BUSY = "ragparse-idle", "ragparse-busy"
# What the child may see of the server's environment (never its secrets).
_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")


def kept_warm() -> int:
    """How many parse processes are kept started, idle or parsing (env EDDI_RAG_PARSE_WORKERS, default 2)."""
    raw = os.environ.get("EDDI_RAG_PARSE_WORKERS", "2").strip()
    if not raw.isdigit():
        raise ValueError(f"EDDI_RAG_PARSE_WORKERS must be a whole number of processes (0 or more), got {raw!r}")
    return int(raw)


class Worker:
    """One parse process, its answers' lines in ``lines`` (None once it has ended)."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k in _ENV}
        self.process = subprocess.Popen([sys.executable, "-B", "-m", "eddi_rag.ingest.parsing"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
        assert self.process.stdout and self.process.stderr
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self._stderr: list[bytes] = []
        self._readers = [threading.Thread(target=_lines, args=(self.process.stdout, self.lines), daemon=True),
                         threading.Thread(target=_tail, args=(self.process.stderr, self._stderr), daemon=True)]
        for t in self._readers:
            t.start()

    def alive(self) -> bool:
        return self.process.poll() is None

    def cpu_seconds(self) -> float:
        """CPU time the process has used so far (Linux's /proc; 0 elsewhere)."""
        try:
            with open(f"/proc/{self.process.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
        except (OSError, ValueError, IndexError):
            return 0.0

    def stderr_tail(self) -> str:
        for t in self._readers:
            t.join(timeout=1)
        return b"".join(self._stderr).decode("utf-8", "replace")

    def kill(self) -> None:
        process = self.process
        if process.returncode is None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)  # its own session: anything it started goes too
            except ProcessLookupError:
                pass
            process.wait()
        for pipe in (process.stdin, process.stdout, process.stderr):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass
        for t in self._readers:
            t.join(timeout=5)


class Pool:
    """``size`` parse processes, idle or parsing, started by one thread; a caller finding none idle waits for one
    started for it (parsing more files at once than ``size``: the extra processes end after their file)."""

    def __init__(self, size: int):
        self.size = size
        self.idle: list[Worker] = []
        self.waiting = 0  # takers waiting for a process
        self.starting = 0
        self.busy = 0  # taken, not given back
        self.failure: OSError | None = None  # why the last process could not be started (None: it was)
        self.closed = False
        self._changed = threading.Condition()
        threading.Thread(target=self._start_processes, name="eddi-rag-parse-workers", daemon=True).start()

    def _wanted(self) -> bool:
        idle = len(self.idle) + self.starting
        return not self.closed and (idle < self.waiting or idle + self.busy < self.size)

    def _start_processes(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._wanted() or self.closed)
                if self.closed:
                    return
                self.starting += 1
            try:
                worker: Worker | None = Worker()
                failure = None
            except OSError as e:
                worker, failure = None, e
            with self._changed:
                self.starting -= 1
                self.failure = failure  # (the callers waiting are told)
                if worker is not None:
                    self.idle.append(worker)
                self._changed.notify_all()
            if worker is None:
                time.sleep(1.0)  # (out of processes: try again soon)

    def take(self) -> Worker:
        """An idle process (one started for this call if none is); OSError when none could be started (out of
        processes or memory: the caller's parse fails, saying so, instead of waiting)."""
        with self._changed:
            self.waiting += 1
            self._changed.notify_all()
            try:
                while True:
                    self._changed.wait_for(lambda: self.idle or self.failure is not None)
                    if not self.idle and self.failure is not None:
                        raise self.failure
                    worker = self.idle.pop(0)
                    if worker.alive():
                        self.busy += 1
                        return worker
                    worker.kill()
            finally:
                self.waiting -= 1
                self._changed.notify_all()  # (a replacement, if fewer are idle than kept)

    def give_back(self, worker: Worker, reuse: bool) -> None:
        """A process done with its file: kept for the next when ``reuse`` (it answered, and did not retire), else killed."""
        with self._changed:
            self.busy -= 1
            kept = reuse and not self.closed and worker.alive() and len(self.idle) + self.busy < self.size
            if kept:
                self.idle.append(worker)
            self._changed.notify_all()  # (a taker waiting, or the starting thread: one fewer is busy)
        if not kept:
            worker.kill()

    def close(self) -> None:
        with self._changed:
            self.closed = True
            idle, self.idle = self.idle, []
            self._changed.notify_all()
        for worker in idle:
            worker.kill()


_pool: Pool | None = None
_pool_pid = 0
_pool_lock = threading.Lock()


def _the_pool() -> Pool:
    global _pool, _pool_pid
    with _pool_lock:
        if _pool is None or _pool_pid != os.getpid():  # (a forked process starts its own)
            _pool, _pool_pid = Pool(kept_warm()), os.getpid()
        return _pool


def take() -> Worker:
    return _the_pool().take()


def give_back(worker: Worker, reuse: bool) -> None:
    _the_pool().give_back(worker, reuse)


@atexit.register
def close() -> None:
    """Kill the idle processes (at exit; a test that wants none)."""
    global _pool
    with _pool_lock:
        pool, _pool = _pool, None
    if pool is not None and _pool_pid == os.getpid():
        pool.close()


def _lines(pipe: IO[bytes], out: queue.Queue[bytes | None]) -> None:
    try:
        for line in pipe:
            out.put(line)
    except (OSError, ValueError):
        pass
    out.put(None)


def _tail(pipe: IO[bytes], out: list[bytes]) -> None:
    try:
        for line in pipe:
            out[:] = [*out[-20:], line]
    except (OSError, ValueError):
        pass


# -- in the child ------------------------------------------------------------------------------

def address_space() -> int:
    """This process's address space in bytes (Linux's /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0
