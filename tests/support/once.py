"""Checks that run once per test command, however many test processes there are (pytest-xdist runs two):
mypy and schemathesis take a minute or more of a core each. The first process to ``start`` one claims it
(an exclusive file in a folder the test processes share) and runs it detached, beside the tests; the test
that reports it, in whichever process, waits for its exit code."""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

from tests.support.waiting import until

SHARED = "EDDI_RAG_TEST_SHARED"  # set by the first process (conftest's pytest_configure), inherited by the workers


def shared_folder() -> Path:
    if not os.environ.get(SHARED):
        os.environ[SHARED] = tempfile.mkdtemp(prefix="eddi-rag-tests-")
    return Path(os.environ[SHARED])


def start(name: str, argv: list[str], cwd: Path, env: dict[str, str] | None = None) -> None:
    """Run ``argv`` once across the test processes: its output goes to ``<name>.out``, its exit code to
    ``<name>.rc`` when it ends."""
    folder = shared_folder()
    try:
        os.close(os.open(folder / f"{name}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return  # another test process runs it
    out, rc = shlex.quote(str(folder / f"{name}.out")), shlex.quote(str(folder / f"{name}.rc"))
    subprocess.Popen(["sh", "-c", f'"$@" > {out} 2>&1; echo $? > {rc}.part; mv {rc}.part {rc}', "sh", *argv], cwd=cwd, env=env,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def result(name: str, seconds: float = 900) -> tuple[int, str]:
    """The exit code and output of the check ``name`` (started by ``start``), once it has ended."""
    rc = shared_folder() / f"{name}.rc"
    until(rc.exists, f"{name} to end", seconds, every=0.5)
    return int(rc.read_text()), (shared_folder() / f"{name}.out").read_text(errors="replace")
