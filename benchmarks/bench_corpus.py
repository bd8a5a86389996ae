"""Every file other projects test their readers with, read by this product and by markitdown (issue 45).

    .venv/bin/pip install -e ".[reader-peer]"   # markitdown, the peer (not a dependency of the product)
    .venv/bin/python benchmarks/bench_corpus.py [--out ~/.cache/eddi-rag/corpus] [--limit 0]

The corpus is fetched and extracted at run time, never committed: the test documents inside the source distributions
of pypdf, python-docx, python-pptx and odfpy on PyPI (``pip download --no-binary``: PDFs, DOCX, PPTX, XLSX, ODT, ODS,
ODP, several of them broken on purpose). Each file goes through what an upload goes through here (format detection,
then the limited parse process, ``ingest.parsing``) and through markitdown's ``convert``. For each reader it prints
how many files gave text, how many failed and why (this product's failure kinds: ``file``, ``reader``,
``dependency``...), and how much of the other's words each found (a file's words as ``[a-z0-9]+`` found in the
other's text, averaged over the files both read): the answers a question about the file could find. Asserts nothing.
"""

from __future__ import annotations

import argparse
import collections
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from eddi_rag.errors import EddiRagError
from eddi_rag.ingest import loaders
from eddi_rag.ingest.limits import DocumentLimits
from eddi_rag.ingest.parsing import parse

SOURCES = {"pypdf": "6.1.1", "python-docx": "1.2.0", "python-pptx": "1.0.2", "odfpy": "1.4.1"}
KINDS = (".pdf", ".docx", ".pptx", ".xlsx", ".odt", ".ods", ".odp")
WORD = re.compile(r"[a-z0-9]+")


def corpus(out: Path) -> list[Path]:
    """The test documents of each source distribution, extracted under ``out`` (once)."""
    for package, version in SOURCES.items():
        target = out / f"{package}-{version}"
        if target.is_dir():
            continue
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-q", "-d", tmp,
                            f"{package}=={version}"], check=True)
            (sdist,) = Path(tmp).iterdir()
            archive = tarfile.open(sdist) if sdist.name.endswith(".tar.gz") else None
            names = archive.getnames() if archive else zipfile.ZipFile(sdist).namelist()
            target.mkdir(parents=True)
            for name in names:
                if name.lower().endswith(KINDS):
                    data = archive.extractfile(name).read() if archive else zipfile.ZipFile(sdist).read(name)  # type: ignore[union-attr]
                    (target / name.replace("/", "__")).write_bytes(data)
    return sorted(p for p in out.rglob("*") if p.is_file() and p.suffix.lower() in KINDS)


def ours(path: Path, limits: DocumentLimits) -> tuple[str | None, str]:
    """(the text, "") or (None, the failure's kind: its message's start)."""
    data = path.read_bytes()
    try:
        fmt = loaders.detect(data, None, path.name)
        parts = parse(fmt, data, path.name, {"chars": 4000}, limits, None, lambda: False, {"mode": "auto", "languages": ["eng"]})
    except EddiRagError as e:
        return None, f"{e.failure or type(e).__name__}: {str(e)[:90]}"
    return "\n".join(p.text for p in parts), ""


def peer(path: Path, converter) -> tuple[str | None, str]:  # noqa: ANN001
    try:
        return converter.convert(str(path)).text_content, ""
    except Exception as e:  # noqa: BLE001 - the peer's own failure, counted
        return None, f"{type(e).__name__}: {str(e)[:90]}"


def found(words_of: str, text: str) -> float:
    """The share of ``words_of``'s distinct words that ``text`` holds."""
    wanted = set(WORD.findall(words_of.lower()))
    return len(wanted & set(WORD.findall(text.lower()))) / len(wanted) if wanted else 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "eddi-rag" / "corpus")
    parser.add_argument("--limit", type=int, default=0, help="files at most (0: all)")
    args = parser.parse_args()
    from markitdown import MarkItDown

    files = corpus(args.out)[: args.limit or None]
    converter, limits = MarkItDown(), DocumentLimits()
    rows, seconds = [], {"eddi-rag": 0.0, "markitdown": 0.0}
    for path in files:
        start = time.perf_counter()
        a = ours(path, limits)
        seconds["eddi-rag"] += time.perf_counter() - start
        start = time.perf_counter()
        b = peer(path, converter)
        seconds["markitdown"] += time.perf_counter() - start
        rows.append((path, a, b))
        print(path.name, "ours:", "ok" if a[0] is not None else a[1], "| markitdown:", "ok" if b[0] is not None else b[1],
              file=sys.stderr, flush=True)
    both = [(a[0], b[0]) for _, a, b in rows if a[0] and b[0] and a[0].strip() and b[0].strip()]
    print(f"{len(files)} files ({', '.join(f'{k} {v}' for k, v in SOURCES.items())})\n")
    print("| reader | gave text | gave none | failed | of the other's words, found (files both read) | seconds |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, i in (("eddi-rag", 1), ("markitdown", 2)):
        texts = [r[i][0] for r in rows]
        failed = sum(t is None for t in texts)
        empty = sum(t is not None and not t.strip() for t in texts)
        share = statistics.mean(found(o, m) if i == 1 else found(m, o) for m, o in ((b_, a_) for a_, b_ in both)) if both else 0
        print(f"| {name} | {len(texts) - failed - empty} | {empty} | {failed} | {share:.3f} | {seconds[name]:.1f} |")
    kinds = collections.Counter(r[1][1].split(":")[0] for r in rows if r[1][0] is None)
    print("\nThis product's failures by kind:", dict(kinds))
    print("Read by markitdown, not here:", [r[0].name for r in rows if r[1][0] is None and r[2][0]])
    print("Read here, not by markitdown:", [r[0].name for r in rows if r[2][0] is None and r[1][0]])


if __name__ == "__main__":
    main()
