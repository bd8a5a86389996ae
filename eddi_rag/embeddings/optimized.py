"""A packaged ONNX model's graph as onnxruntime optimises it, kept on disk once (issue 67, point 4).

Making the default model's session optimises its graph each time: 0.29 s, and 230 MB in the process. Saved once,
optimised, with its weights in a file beside it (``model.onnx`` + ``model.data``), a session is made from it in
0.07 s with optimisation off, the same numbers out, and the weights mapped from the file: the page cache holds one
copy for every process on the machine (each process keeps its own repacked matrices, about 74 MB). So ``serve``'s
processes make their own sessions after they fork instead of sharing one made before (which held ``/health`` back).

The folder is a cache: ``EDDI_RAG_MODEL_CACHE`` (``off``: none), else ``$XDG_CACHE_HOME/eddi-rag/onnx``, else
``~/.cache/eddi-rag/onnx``; one subfolder per model checksum, onnxruntime version and CPU (an optimised graph may use
the CPU's instructions). Written into a temporary folder and renamed into place; a folder that does not load is
removed and written again; a cache that cannot be written leaves the session as it was made."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import logging
import os
import platform
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

CACHE = "EDDI_RAG_MODEL_CACHE"
MODEL, DATA, MANIFEST = "model.onnx", "model.data", "manifest.json"


def root() -> Path | None:
    """The cache's folder, None when ``EDDI_RAG_MODEL_CACHE=off``."""
    chosen = os.environ.get(CACHE, "").strip()
    if chosen.lower() in ("off", "none", "0"):
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "eddi-rag" / "onnx"


@lru_cache(maxsize=1)
def _machine() -> str:
    """The onnxruntime version and the CPU, as a folder name's part (without importing onnxruntime: 0.12 s)."""
    try:
        version = importlib.metadata.version("onnxruntime")
    except importlib.metadata.PackageNotFoundError:
        version = "none"
    flags = ""  # (platform.processor() runs uname)
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line for line in f if line.startswith(("flags", "Features"))), flags)
    except OSError:
        pass
    return f"ort{version}-{platform.machine()}-{hashlib.sha256(flags.encode()).hexdigest()[:12]}"


def folder(sha256: str) -> Path | None:
    """Where the optimised graph of the model whose checksum is ``sha256`` is kept (None: no cache)."""
    base = root()
    return None if base is None else base / f"{sha256[:16]}-{_machine()}"


def cached(sha256: str) -> bool:
    """Whether the optimised graph is there as written: the graph's checksum and the weights' size as its manifest
    says (the weights, 90 MB, are not hashed at each start; the folder is its owner's alone)."""
    where = folder(sha256)
    if where is None:
        return False
    try:
        manifest = json.loads((where / MANIFEST).read_text(encoding="utf-8"))
        return (hashlib.sha256((where / MODEL).read_bytes()).hexdigest() == manifest["graph"]
                and (where / DATA).stat().st_size == manifest["weights"])
    except (OSError, ValueError, KeyError, TypeError):
        return False


def session(model_path: str, sha256: str | None, threads: int | None) -> Any:
    """An onnxruntime CPU session of the model at ``model_path`` on ``threads`` intra-op threads; for a packaged
    model (``sha256``: its checksum, verified by the caller), made from the optimised graph kept on disk, which the
    first session writes there (None: optimised as it is made, nothing kept)."""
    import onnxruntime as ort

    def options(optimised: bool = False) -> Any:
        made = ort.SessionOptions()
        if threads:
            made.intra_op_num_threads = threads
        if optimised:
            made.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        return made

    def plain() -> Any:
        return ort.InferenceSession(model_path, options(), providers=["CPUExecutionProvider"])

    where = None if sha256 is None else folder(sha256)
    if sha256 is None or where is None:
        return plain()
    if cached(sha256):
        try:
            return ort.InferenceSession(str(where / MODEL), options(optimised=True), providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - (onnxruntime's own errors: a damaged cache is written again)
            log.warning("the optimised model in %s does not load (%s): writing it again", where, e)
    shutil.rmtree(where, ignore_errors=True)  # (a damaged one: renaming the new one into place needs its name free)
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        writing = Path(tempfile.mkdtemp(prefix=".writing-", dir=where.parent))  # (owner-only)
    except OSError as e:
        log.info("no cache for the optimised model (%s): each session optimises it", e)
        return plain()
    try:
        saving = options()
        saving.log_severity_level = 3  # (its warning that the graph suits this CPU: the folder's name holds the CPU)
        saving.optimized_model_filepath = str(writing / MODEL)
        saving.add_session_config_entry("session.optimized_model_external_initializers_file_name", DATA)
        saving.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
        try:
            made = ort.InferenceSession(model_path, saving, providers=["CPUExecutionProvider"])
        except Exception as e:  # noqa: BLE001 - (writing the graph failed: a full disk, a read-only folder)
            log.info("the optimised model could not be kept in %s (%s)", where.parent, e)
            return plain()
        try:
            manifest = {"model": model_path, "sha256": sha256, "graph": hashlib.sha256((writing / MODEL).read_bytes()).hexdigest(),
                        "weights": (writing / DATA).stat().st_size}
            (writing / MANIFEST).write_text(json.dumps(manifest), encoding="utf-8")
            os.rename(writing, where)  # (refused when another process put it there meanwhile: theirs is kept)
        except OSError as e:
            log.info("the optimised model could not be kept in %s (%s)", where, e)
        return made
    finally:
        shutil.rmtree(writing, ignore_errors=True)
