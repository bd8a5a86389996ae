"""Many small files (issue 46, point 3): small DOCX files uploaded through REST against the bare pipeline.

    .venv/bin/python benchmarks/bench_docx_uploads.py [--docs 200] [--corpus ../shared/data/nfcorpus/corpus.jsonl]

NFCorpus documents written as DOCX with python-docx at run time (a heading and the abstract), a knowledge base with
every default and the real local model. Rows, in files/s and as a multiple of the bare pipeline's:

- the bare pipeline: python-docx reads each file and the same local model embeds the same chunk texts, in one process
  (no isolation, no store, no server);
- REST with warm parse processes (``EDDI_RAG_PARSE_WORKERS``, default 2), one client uploading one file per request
  (``POST /ingest``, the ingestion queued), timed from the first upload until every ingestion completed;
- the same with ``EDDI_RAG_PARSE_WORKERS=0``: a process started for each file (as before issue 46).

The goal: within 2x of the bare pipeline. The server runs under uvicorn on 127.0.0.1 in this process; traffic goes
there only. Asserts nothing about time.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

import docx
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_load import serving  # noqa: E402
from bench_spine import DEFAULT_CORPUS, load_texts  # noqa: E402

from eddi_rag.embeddings.local import LocalOnnxEmbeddings  # noqa: E402
from eddi_rag.ingest import parse_workers  # noqa: E402
from eddi_rag.ingest.pipeline import EMBED_BATCH  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402

CONFIG = {"name": "docx uploads", "embeddingProvider": "local", "storeType": "sqlite"}
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def as_docx(text: str) -> bytes:
    title, _, body = text.partition("\n")
    document = docx.Document()
    document.add_heading(title, 1)
    document.add_paragraph(body.strip())
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def bare(files: list[bytes], chunk_texts: list[str], model: LocalOnnxEmbeddings) -> float:
    """Seconds to read every file with python-docx and embed the same chunk texts, in one process."""
    t0 = time.perf_counter()
    for data in files:
        "\n".join(p.text for p in docx.Document(io.BytesIO(data)).paragraphs)
    for start in range(0, len(chunk_texts), EMBED_BATCH):
        model.embed_documents(chunk_texts[start : start + EMBED_BATCH])
    return time.perf_counter() - t0


def through_rest(files: list[bytes], warm: int) -> tuple[float, list[str]]:
    """Seconds to upload every file through REST (one client) until every ingestion completed, with ``warm`` parse
    processes kept ready; and the chunk texts stored."""
    parse_workers.close()
    os.environ["EDDI_RAG_PARSE_WORKERS"] = str(warm)
    with tempfile.TemporaryDirectory() as tmp:
        rt = Runtime(tmp)
        kb = rt.resources.create("rags", CONFIG).id
        rt.embeddings.for_config(rt.rag_config(kb)).embed_query("warm up")
        with serving(rt) as base, httpx.Client(base_url=base, timeout=120) as http:
            t0 = time.perf_counter()
            for i, data in enumerate(files):
                http.post(f"/ragstore/rags/{kb}/ingest", params={"documentName": f"doc{i}.docx"}, content=data,
                          headers={"Content-Type": DOCX}).raise_for_status()
            while not rt.jobs.idle():
                time.sleep(0.01)
            took = time.perf_counter() - t0
        store = rt.stores.get(kb, rt.rag_config(kb))
        texts = [c.text for c in store.get()]
        failed = rt.db.query("SELECT COUNT(*) FROM ingestion_jobs WHERE status != 'completed'")[0][0]
        rt.close()
    parse_workers.close()
    if failed:
        raise SystemExit(f"{failed} ingestions did not complete")
    return took, texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=200)
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    args = parser.parse_args()
    files = [as_docx(t) for t in load_texts(args.corpus, args.docs)]
    warm, texts = through_rest(files, 2)
    cold, _ = through_rest(files, 0)
    model = LocalOnnxEmbeddings()
    model.embed_documents(texts[:8])
    alone = bare(files, texts, model)
    print(f"\n{len(files)} small DOCX files ({len(texts)} chunks), the local model\n")
    print("| what | files/s | × bare pipeline's time |\n|---|---:|---:|")
    for what, seconds in (("bare pipeline: python-docx + the model, one process", alone),
                          ("REST, warm parse processes (EDDI_RAG_PARSE_WORKERS=2)", warm),
                          ("REST, a process started for each file (EDDI_RAG_PARSE_WORKERS=0)", cold)):
        print(f"| {what} | {len(files) / seconds:.1f} | {seconds / alone:.2f} |")


if __name__ == "__main__":
    main()
