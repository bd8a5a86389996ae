"""OCR engines side by side on scans whose text is known (issue 32): claude-docs-qa pages printed to PDF by
headless Chromium, rasterised at 150 dpi, greyscale, turned by 0.7° (``tests/support/scans.py``), and a German
page written here. For each engine: character error rate against the digital PDF's own text layer (whitespace
collapsed), pages per second, and peak memory (this process and its children) on this machine.

    .venv/bin/python benchmarks/bench_ocr.py [--docs 8] [--data ../shared/data/claude-docs-qa] [--pages 100]

Then a scanned PDF of ``--pages`` pages (those scans, repeated) is ingested end to end as the server ingests an
upload (``Runtime.ingest_file``: the limited parse process, OCR, chunking, the local model, the sqlite store):
its time, and the peak memory of this process and of the parse process with its Tesseract runs.
The peer engine needs ``pip install 'eddi-rag[ocr-peer]'``.

Each engine runs in a process of its own, so its peak memory is its own. ``tesseract`` runs as eddi-rag runs it
(OMP_THREAD_LIMIT=1), ``tesseract-openmp`` with its default threads."""

from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GERMAN = """# Reisebedingungen

## 1. Fahrkarten

Fahrkarten gelten für die gebuchte Verbindung. Bei Verspätungen über 60 Minuten erstatten wir 25 Prozent des
Fahrpreises; über 120 Minuten die Hälfte. Größere Gepäckstücke müssen vorab angemeldet werden.

## 2. Haustiere

Kleine Hunde reisen kostenlos, wenn sie in einer Transportbox bleiben. Für größere Hunde gilt der halbe Fahrpreis
der zweiten Klasse; sie müssen an der Leine geführt werden und einen Maulkorb tragen.

## 3. Schlafwagen

Im Schlafwagen gibt es Abteile für ein, zwei oder drei Personen. Frühstück ist im Preis enthalten und wird ab
6:30 Uhr serviert. Bitte räumen Sie das Abteil spätestens zehn Minuten vor der Ankunft.
"""


def normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip()


def cer(found: str, truth: str) -> float:
    from rapidfuzz.distance import Levenshtein

    truth = normal(truth)
    return Levenshtein.distance(normal(found), truth) / max(1, len(truth))


def run_engine(engine: str, folder: Path) -> None:
    """In a child: OCR every page image in ``folder`` (page-N-<lang>.png); print one JSON line of results."""
    from PIL import Image

    pages = sorted(folder.glob("page-*.png"))
    if engine.startswith("tesseract"):
        import os

        import pytesseract

        if engine == "tesseract":  # one thread: its OpenMP threads spin against each other on 2 cores (9x slower here)
            os.environ["OMP_THREAD_LIMIT"] = "1"

        def read(image, lang):
            return pytesseract.image_to_string(image, lang={"en": "eng", "de": "deu"}[lang])
    else:
        from rapidocr_onnxruntime import RapidOCR

        ocr = RapidOCR()

        def read(image, lang):
            import numpy as np

            result, _ = ocr(np.asarray(image.convert("RGB")))
            return "\n".join(line[1] for line in result or [])
    out, started = {}, time.perf_counter()
    for page in pages:
        lang = page.stem.rsplit("-", 1)[1]
        out[page.name] = read(Image.open(page), lang)
    seconds = time.perf_counter() - started
    peak = max(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    print(json.dumps({"texts": out, "seconds": seconds, "peak_mb": peak / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=8)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "claude-docs-qa"))
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    parser.add_argument("--e2e", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        run_engine(args.engine, Path(args.folder))
        return
    if args.e2e:
        end_to_end(sorted(Path(args.e2e).glob("page-*-en.png")), args.pages)
        return
    import tempfile

    from tests.support import scans

    docs = sorted(Path(args.data, "docs").glob("*.md"))[: args.docs]
    with tempfile.TemporaryDirectory() as folder:
        truth: dict[str, str] = {}
        n = 0
        for lang, markdown in [*(("en", d.read_text()) for d in docs), ("de", GERMAN)]:
            pdf = scans.printed(markdown)
            for text, image in zip(scans.page_texts(pdf), scans.scanned_pages(pdf)):
                if not text.strip():
                    continue
                n += 1
                name = f"page-{n:03}-{lang}.png"
                image.save(Path(folder, name))
                truth[name] = text
        print(f"{n} scanned pages ({sum(1 for k in truth if k.endswith('-en.png'))} English, "
              f"{sum(1 for k in truth if k.endswith('-de.png'))} German), 150 dpi greyscale, turned 0.7°")
        print("| engine | CER English | CER German | pages/s | peak RSS MB |")
        print("|---|---:|---:|---:|---:|")
        for engine in ("tesseract", "tesseract-openmp", "rapidocr"):
            done = subprocess.run([sys.executable, __file__, "--engine", engine, "--folder", folder],
                                  capture_output=True, text=True, check=True)
            result = json.loads(done.stdout.strip().splitlines()[-1])
            rates = {lang: [cer(result["texts"][k], truth[k]) for k in truth if k.endswith(f"-{lang}.png")] for lang in ("en", "de")}
            mean = {lang: sum(r) / len(r) for lang, r in rates.items() if r}
            print(f"| {engine} | {mean.get('en', float('nan')):.3f} | {mean.get('de', float('nan')):.3f} | "
                  f"{n / result['seconds']:.2f} | {result['peak_mb']:.0f} |")
        # in a process of its own: its children are the parse process and its Tesseract runs alone
        print(subprocess.run([sys.executable, __file__, "--e2e", folder, "--pages", str(args.pages)],
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1])


def end_to_end(images: list[Path], pages: int) -> None:
    """A scanned PDF of ``pages`` pages ingested as an upload is."""
    import os

    from PIL import Image

    from eddi_rag.ingest.limits import DocumentLimits
    from eddi_rag.runtime import Runtime
    from tests.support import scans

    scan = scans.image_pdf([Image.open(images[i % len(images)]) for i in range(pages)])
    limits = DocumentLimits.from_env()
    os.environ.setdefault("EDDI_RAG_MAX_OCR_PAGES", str(max(pages, limits.max_ocr_pages)))
    os.environ.setdefault("EDDI_RAG_PARSE_SECONDS", str(max(limits.parse_seconds, pages * 5)))
    with Runtime(None) as runtime:
        kb = runtime.saving.create("rags", {"name": "scans", "embeddingProvider": "local", "storeType": "sqlite"}).id
        started = time.perf_counter()
        chunks = runtime.ingest_file(kb, "scan.pdf", scan)
        seconds = time.perf_counter() - started
    server = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    parser = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"{pages}-page scanned PDF ({len(scan) / 1e6:.1f} MB) ingested end to end: {seconds:.0f} s "
          f"({pages / seconds:.2f} pages/s), {chunks} chunks; peak RSS: this process {server:.0f} MB, "
          f"the parse process (and its Tesseract runs) {parser:.0f} MB")


if __name__ == "__main__":
    main()
