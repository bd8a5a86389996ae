"""claude-docs-qa's pages as people have them on paper (issue 32): each page printed to PDF by headless Chromium,
then scanned (150 dpi, greyscale, turned 0.7°: ``tests/support/scans.py``) into an image-only PDF, and into one
PNG per printed page. Three knowledge bases with every default, one per form (the Markdown, the scanned PDFs,
the PNGs), answer the same questions; the figure is the data set's metric, hit@5 within ``--budget`` characters
(``bench_docs_qa.py``). Goal: the scans within 0.05 of the Markdown.

    .venv/bin/python benchmarks/bench_scans_qa.py [--data ../shared/data/claude-docs-qa] [--budget 12000]
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

from bench_docs_qa import BASE, Bench, arguments, question_set  # noqa: E402

from eddi_rag.api.app import create_app  # noqa: E402
from eddi_rag.runtime import Runtime  # noqa: E402
from tests.support import scans  # noqa: E402


def main() -> None:
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--form", action="append", choices=["Markdown", "scanned PDF", "PNG per page"],
                        help="repeatable; default: all three")
    args = parser.parse_args()
    qa, pages = question_set(args.data)
    say = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    started = time.perf_counter()
    forms: dict[str, list[tuple[str, bytes, str]]] = {"Markdown": [], "scanned PDF": [], "PNG per page": []}
    printed_pages = 0
    for page in pages:
        images = scans.scanned_pages(scans.printed(page.read_text(), page.stem))
        printed_pages += len(images)
        forms["Markdown"].append((page.name, page.read_bytes(), "text/markdown"))
        forms["scanned PDF"].append((f"{page.stem}.pdf", scans.image_pdf(images), "application/pdf"))
        forms["PNG per page"] += [(f"{page.stem}-p{i}.png", scans.png(image), "image/png") for i, image in enumerate(images, 1)]
    say(f"{len(pages)} pages printed and scanned: {printed_pages} printed pages in {time.perf_counter() - started:.0f} s")
    rows = []
    with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as runtime, TestClient(create_app(runtime)) as client:
        bench = Bench(client, qa, args.budget)
        for form, files in ((f, forms[f]) for f in args.form or forms):
            r = client.post(BASE, json={"name": form, "embeddingProvider": "local", "storeType": "sqlite"})
            kb = r.headers["Location"].split("/")[-1].split("?")[0]
            started = time.perf_counter()
            jobs = [job for start in range(0, len(files), 100)  # (at most 100 files per request)
                    for job in client.post(f"{BASE}/{kb}/ingest", files=[("file", f) for f in files[start:start + 100]]).json()["ingestions"]]
            runtime.jobs.wait_idle()
            failed = [j["documentName"] for j in jobs
                      if client.get(f"{BASE}/{kb}/ingestion/{j['ingestionId']}/status").json()["status"] != "completed"]
            seconds = time.perf_counter() - started
            count = runtime.stores.get(kb, runtime.rag_config(kb)).count()
            rows.append((form, len(files), count, seconds, len(failed), bench.score(kb)))
            say(" | ".join(map(str, rows[-1])))
    print(f"claude-docs-qa: {len(qa)} questions, {len(pages)} pages ({printed_pages} printed), every default, "
          f"hit@5 within {args.budget} characters\n")
    print("| form | files | chunks | ingest s | failed | hit@5 |")
    print("|---|---:|---:|---:|---:|---:|")
    for form, n, count, seconds, failed, score in rows:
        print(f"| {form} | {n} | {count} | {seconds:.0f} | {failed} | {score:.2f} |")


if __name__ == "__main__":
    main()
