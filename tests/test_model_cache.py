"""The default model's optimised graph kept on disk (issue 67, point 4: ``embeddings.optimized``): written once, the
same vectors from it in every language, a damaged or unwritable cache rebuilt or done without, never an error; and a
forked ``serve`` whose processes each map its weights from the one file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import psutil
import pytest

from eddi_rag.embeddings import local, optimized
from tests.support.ports import free_port
from tests.support.serving import wait_until_healthy
from tests.support.waiting import until

TEXTS = ["Expenses are reimbursed within 30 days.", "Reisekosten werden innerhalb von 30 Tagen erstattet.",
         "Les frais sont remboursés sous 30 jours.", "费用在30天内报销。", "経費は30日以内に払い戻されます。"]


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv(optimized.CACHE, str(tmp_path / "cache"))
    return tmp_path / "cache"


def vectors(session) -> np.ndarray:
    model = local.LocalOnnxEmbeddings()
    model.session = session
    return model.embed_array(TEXTS)


def made():
    model, _ = local.default_model_files()
    return optimized.session(str(model), local.default_model_sha256(), 1)


def test_the_first_session_writes_the_graph_and_the_next_reads_it_with_the_same_vectors(cache):
    sha = local.default_model_sha256()
    assert not optimized.cached(sha)
    first = made()
    where = optimized.folder(sha)
    assert where is not None and where.parent == cache and optimized.cached(sha)
    assert sorted(p.name for p in where.iterdir()) == ["manifest.json", "model.data", "model.onnx"]
    assert oct(where.stat().st_mode & 0o777) == "0o700"  # (its owner's alone)
    assert not [p for p in cache.iterdir() if p.name.startswith(".writing-")]
    again = made()
    assert Path(again._model_path) == where / "model.onnx"  # (made from the graph on disk, not optimised again)
    assert np.allclose(vectors(first), vectors(again), atol=1e-6)
    assert json.loads((where / "manifest.json").read_text())["weights"] == (where / "model.data").stat().st_size


@pytest.mark.parametrize("damage", ["truncated weights", "edited graph", "no manifest"])
def test_a_damaged_graph_is_written_again(cache, damage):
    fresh = vectors(made())
    where = optimized.folder(local.default_model_sha256())
    if damage == "truncated weights":
        with open(where / "model.data", "r+b") as f:
            f.truncate(1000)
    elif damage == "edited graph":
        (where / "model.onnx").write_bytes((where / "model.onnx").read_bytes()[:-10] + b"\0" * 10)
    else:
        (where / "manifest.json").unlink()
    assert not optimized.cached(local.default_model_sha256())
    assert np.allclose(vectors(made()), fresh, atol=1e-6)  # (optimised again, and kept again)
    assert optimized.cached(local.default_model_sha256())


def test_a_cache_that_cannot_be_written_or_is_off_leaves_the_session_as_made(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    monkeypatch.setenv(optimized.CACHE, str(blocked / "cache"))
    assert vectors(made()).shape == (5, 384)
    monkeypatch.setenv(optimized.CACHE, "off")
    assert optimized.folder(local.default_model_sha256()) is None and vectors(made()).shape == (5, 384)


def test_the_graph_is_kept_per_onnxruntime_and_cpu(cache, monkeypatch):
    one = optimized.folder("ab" * 32)
    monkeypatch.setattr(optimized, "_machine", lambda: "ort0.0-other-cpu")
    assert optimized.folder("ab" * 32) != one and one.name.startswith("abababababababab-ort")


def mapped(pid: int) -> set[str]:
    return {line.split()[-1] for line in Path(f"/proc/{pid}/maps").read_text().splitlines() if line.endswith("model.data")}


@pytest.mark.integration
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_forked_processes_make_their_sessions_from_the_one_file_once_it_is_there(tmp_path, monkeypatch):
    """The first start of an installation makes the session before forking (and writes the graph); the next forks
    at once and each serving process maps the weights of the same file."""
    monkeypatch.setenv(optimized.CACHE, str(tmp_path / "cache"))
    env = dict(os.environ)
    said = []
    for start in range(2):
        port = free_port()
        server = subprocess.Popen([sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(port), "--processes", "2",
                                   "--data-dir", str(tmp_path / "data")], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)
        try:
            wait_until_healthy(f"http://127.0.0.1:{port}", server)
            serving = until(lambda: [p.pid for p in psutil.Process(server.pid).children()  # noqa: B023
                                     if p.name() == "ragserve"] or None, "the serving processes")
            assert len(serving) == 2, serving
            if start == 1:
                where = str(optimized.folder(local.default_model_sha256()) / "model.data")
                until(lambda: all(mapped(pid) == {where} for pid in serving), "each process to map the weights", 60)  # noqa: B023
                assert mapped(server.pid) == set()  # (the starting process made no session)
        finally:
            server.terminate()
            said.append(server.communicate(timeout=60)[0])
    assert "forked from this process once it had imported what answers /health and the default model's session" in said[0], said[0]
    assert "each makes the default model's session from its optimised graph on disk, the weights shared" in said[1], said[1]
