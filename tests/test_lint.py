"""ruff's rules hold for the whole repository and mypy finds nothing in eddi_rag (pyproject.toml's
[tool.ruff] and [tool.mypy])."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.lint]

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in the dev extra: scripts/setup installs it"
    result = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


_mypy: subprocess.Popen[str] | None = None


def start_mypy() -> subprocess.Popen[str]:
    """mypy as a process of its own; conftest starts it when the tests are collected, so it runs beside
    the other tests instead of after them (the same check: a whole, non-incremental run)."""
    global _mypy
    if _mypy is None:
        mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
        assert mypy, "mypy is in the dev extra: scripts/setup installs it"
        _mypy = subprocess.Popen([mypy, "--no-incremental", "--config-file", str(ROOT / "pyproject.toml")], cwd=ROOT, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return _mypy


def test_mypy_finds_nothing():
    process = start_mypy()
    output, _ = process.communicate(timeout=600)
    assert process.returncode == 0, output[-6000:]
