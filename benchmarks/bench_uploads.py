"""Uploads at the model's speed (issue 34, point 4): documents uploaded one per request against the bare model.

    .venv/bin/python benchmarks/bench_uploads.py [--docs 200] [--corpus ../shared/data/nfcorpus/corpus.jsonl]
        [--runs 1x1 2x1 2x4 4x4]

NFCorpus documents as Markdown, a knowledge base with every default and the real local model, each row in a new
runtime (a cold embedding cache). Rows, in chunks/s and as a multiple of the bare model's:

- the bare model: ``embed_documents`` over the same chunk texts in batches of 64 (the pipeline's batch size), and
  the same model run as before issue 34 (eight texts a run, whatever their length);
- ``Runtime.ingest``, one document after another in one thread (the synchronous path);
- ``Ingesting.batch`` of every document at once (the bulk path);
- REST, one client uploading each document and waiting until its ingestion completed before the next;
- REST, ``WxC``: the server with W ingestion workers (EDDI_RAG_INGESTION_WORKERS), C clients each uploading its share
  one request after another (``POST /ingest``, the ingestion queued), timed from the first upload until every
  ingestion completed;
- REST to ``eddi-rag serve`` in a process of its own (``--apart WxC``, default 2x1: the default workers, one client),
  as a server runs: the clients no longer share its interpreter.

The goal: uploads at 0.95× the bare model or better (issue 46: 0.9). The ``WxC`` rows' server runs under uvicorn on
127.0.0.1 in this process, its clients beside it; traffic goes to 127.0.0.1 only. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import free_port, serving  # noqa: E402
from bench_spine import DEFAULT_CORPUS, load_texts  # noqa: E402

from eddi_rag.embeddings.local import LocalOnnxEmbeddings  # noqa: E402
from eddi_rag.ingest.pipeline import EMBED_BATCH, Document  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402

CONFIG = {"name": "uploads", "embeddingProvider": "local", "storeType": "sqlite"}


def fresh(tmp: str) -> tuple[Runtime, str]:
    """A runtime with a cold embedding cache, a KB with every default, its model loaded."""
    rt = Runtime(tmp)
    kb = rt.resources.create("rags", CONFIG).id
    rt.embeddings.for_config(rt.rag_config(kb)).embed_query("warm up")
    return rt, kb


def served(rt: Runtime, workers: int, run: Callable[[str], None]) -> float:
    """Seconds ``run(base_url)`` takes against the app under uvicorn with ``workers`` ingestion workers, until the
    queue is idle."""
    rt.jobs.worker.workers = workers  # (before its threads start, at the first upload)
    with serving(rt) as base:
        t0 = time.perf_counter()
        run(base)
        while not rt.jobs.idle():
            time.sleep(0.01)
        return time.perf_counter() - t0


def upload(base: str, kb: str, named: list[tuple[int, str]], wait: bool = False) -> None:
    with httpx.Client(base_url=base, timeout=120) as http:
        for i, text in named:
            r = http.post(f"/ragstore/rags/{kb}/ingest", params={"documentName": f"doc{i}.md", "replace": "true"},
                          content=text.encode(), headers={"Content-Type": "text/markdown"})
            r.raise_for_status()
            while wait:
                status = http.get(f"/ragstore/rags/{kb}/ingestion/{r.json()['ingestionId']}/status").json()["status"]
                if status not in ("pending", "processing"):
                    break
                time.sleep(0.005)


def apart(texts: list[str], workers: int, clients: int) -> tuple[int, float]:
    """(chunks, seconds) of ``clients`` uploading ``texts`` to ``eddi-rag serve`` in its own process with ``workers``
    ingestion workers, from the first upload until every ingestion completed (the model loaded before)."""
    with tempfile.TemporaryDirectory() as tmp:
        rt, kb = fresh(tmp)
        rt.close()
        port = free_port()
        env = {**os.environ, "EDDI_RAG_INGESTION_WORKERS": str(workers), "EDDI_RAG_RATE_LIMIT_INGEST": "none",
               "EDDI_RAG_RATE_LIMIT_QUERY": "none"}
        server = subprocess.Popen([str(Path(sys.executable).with_name("eddi-rag")), "serve", "--data-dir", tmp,
                                   "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        try:
            with httpx.Client(base_url=base, timeout=120) as http:
                while True:
                    try:
                        if http.get("/health").status_code == 200:
                            break
                    except httpx.TransportError:
                        time.sleep(0.1)
                http.post(f"/ragstore/rags/{kb}/query", json={"query": "warm up"}).raise_for_status()  # (the model loaded)
                ids: list[str] = []

                def send(share: list[tuple[int, str]]) -> None:
                    with httpx.Client(base_url=base, timeout=120) as mine:
                        for i, text in share:
                            r = mine.post(f"/ragstore/rags/{kb}/ingest", params={"documentName": f"doc{i}.md", "replace": "true"},
                                          content=text.encode(), headers={"Content-Type": "text/markdown"})
                            r.raise_for_status()
                            ids.append(r.json()["ingestionId"])

                t0 = time.perf_counter()
                threads = [threading.Thread(target=send, args=(list(enumerate(texts))[c::clients],)) for c in range(clients)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                chunks = 0
                for ingestion in ids:
                    while (job := http.get(f"/ragstore/rags/{kb}/ingestion/{ingestion}/status").json())["status"] in (
                            "pending", "processing"):
                        time.sleep(0.05)
                    chunks += int(job["chunks"] or 0)
                return chunks, time.perf_counter() - t0
        finally:
            server.terminate()
            server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--runs", nargs="*", default=["1x1", "2x1", "2x4", "4x4"], help="WORKERSxCLIENTS")
    parser.add_argument("--apart", nargs="*", default=["2x1"], help="WORKERSxCLIENTS against eddi-rag serve in its own process")
    args = parser.parse_args()
    texts = [f"# {t.split(chr(10), 1)[0]}\n\n{t.split(chr(10), 1)[-1].strip()}" for t in load_texts(args.corpus, args.docs)]
    rows: list[tuple[str, int, float]] = []  # (what, chunks, seconds)

    with tempfile.TemporaryDirectory() as tmp:
        rt, kb = fresh(tmp)
        t0 = time.perf_counter()
        chunks = sum(rt.ingesting.text(kb, f"doc{i}.md", t) for i, t in enumerate(texts))
        rows.append(("`Runtime.ingest`, one document after another (synchronous)", chunks, time.perf_counter() - t0))
        store = rt.stores.get(kb, rt.rag_config(kb))
        chunk_texts = [c.text for c in store.get()]
        rt.close()
    model = LocalOnnxEmbeddings()
    model.embed_documents(chunk_texts[:8])
    t0 = time.perf_counter()
    for start in range(0, len(chunk_texts), EMBED_BATCH):
        model.embed_documents(chunk_texts[start : start + EMBED_BATCH])
    bare = len(chunk_texts) / (time.perf_counter() - t0)
    model.batch_tokens = 10**9  # the model as it ran before issue 34: eight texts a run, whatever their length
    t0 = time.perf_counter()
    for start in range(0, len(chunk_texts), EMBED_BATCH):
        model.embed_documents(chunk_texts[start : start + EMBED_BATCH])
    eight = len(chunk_texts) / (time.perf_counter() - t0)
    del model

    with tempfile.TemporaryDirectory() as tmp:
        rt, kb = fresh(tmp)
        t0 = time.perf_counter()
        result = rt.ingesting.batch([Document(f"doc{i}.md", t) for i, t in enumerate(texts)], kb)
        rows.append(("`Ingesting.batch`, every document at once (bulk)", result.chunk_count, time.perf_counter() - t0))
        rt.close()
    with tempfile.TemporaryDirectory() as tmp:
        rt, kb = fresh(tmp)
        took = served(rt, 1, lambda base: upload(base, kb, list(enumerate(texts)), wait=True))
        rows.append(("REST, 1 client, each upload waited for until its ingestion completed", chunks, took))
        rt.close()
    for run in args.runs:
        workers, clients = (int(x) for x in run.split("x"))
        with tempfile.TemporaryDirectory() as tmp:
            rt, kb = fresh(tmp)
            shares = [list(enumerate(texts))[c::clients] for c in range(clients)]

            def run_clients(base: str) -> None:
                threads = [threading.Thread(target=upload, args=(base, kb, share)) for share in shares]  # noqa: B023
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()

            took = served(rt, workers, run_clients)
            done = rt.stores.get(kb, rt.rag_config(kb)).count()
            rows.append((f"REST, {workers} ingestion worker{'s' * (workers > 1)}, {clients} client{'s' * (clients > 1)} "
                         "uploading one document per request", done, took))
            rt.close()

    for run in args.apart:
        workers, clients = (int(x) for x in run.split("x"))
        done, took = apart(texts, workers, clients)
        rows.append((f"REST to `eddi-rag serve` in its own process, {workers} ingestion worker{'s' * (workers > 1)}, "
                     f"{clients} client{'s' * (clients > 1)} uploading one document per request", done, took))

    print(f"\n{args.docs} NFCorpus documents, {len(chunk_texts)} chunks, the local model\n")
    print("| what | chunks/s | × bare model |\n|---|---:|---:|")
    print(f"| bare model, `embed_documents` in batches of {EMBED_BATCH} | {bare:.1f} | 1.00 |")
    print(f"| the same, eight texts a model run whatever their length (before issue 34) | {eight:.1f} | {eight / bare:.2f} |")
    for what, n, seconds in rows:
        print(f"| {what} | {n / seconds:.1f} | {n / seconds / bare:.2f} |")


if __name__ == "__main__":
    main()
