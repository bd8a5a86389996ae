"""ruff's rules hold for the whole repository and mypy finds nothing in eddi_rag (pyproject.toml's
[tool.ruff] and [tool.mypy])."""

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    ruff = shutil.which("ruff", path=str(Path(sys.executable).parent)) or shutil.which("ruff")
    assert ruff, "ruff is in the dev extra: scripts/setup installs it"
    result = subprocess.run([ruff, "check", "--no-cache", "--output-format", "concise", str(ROOT)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    mypy = shutil.which("mypy", path=str(Path(sys.executable).parent)) or shutil.which("mypy")
    assert mypy, "mypy is in the dev extra: scripts/setup installs it"
    result = subprocess.run([mypy, "--no-incremental", "--config-file", str(ROOT / "pyproject.toml")], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr
