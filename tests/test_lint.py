"""ruff's rules hold for the whole repository and mypy finds nothing in eddi_rag (pyproject.toml's
[tool.ruff] and [tool.mypy])."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import once

pytestmark = [pytest.mark.integration, pytest.mark.lint]

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in the dev extra: scripts/setup installs it"
    result = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def start_mypy() -> None:
    """mypy as a process of its own, once per test command; conftest starts it when the tests are collected,
    so it runs beside the other tests instead of after them (the same check: a whole, non-incremental run)."""
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy, "mypy is in the dev extra: scripts/setup installs it"
    once.start("mypy", [mypy, "--no-incremental", "--config-file", str(ROOT / "pyproject.toml")], cwd=ROOT)


def test_mypy_finds_nothing():
    start_mypy()
    returncode, output = once.result("mypy", 600)
    assert returncode == 0, output[-6000:]
