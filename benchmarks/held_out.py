"""A held-out documentation question-answering set, made again on any machine (issue 45, point 7): the defaults are
chosen on claude-docs-qa and NFCorpus, and must hold on documentation they were not tuned on.

    .venv/bin/python benchmarks/held_out.py [--out ~/.cache/eddi-rag/held-out]

The documents: the 14 Markdown pages of *attrs*' own documentation as its authors wrote them, taken from its source
distribution on PyPI (``attrs==24.3.0``, MIT licence) with ``pip download`` and extracted here, never committed. The
questions: ``held_out/attrs-qa.jsonl`` (committed), 28 written by hand in a user's words, each with the sentence of
the page that answers it cut verbatim (checked at every build). The result is claude-docs-qa's layout
(``<out>/attrs-docs-qa/docs/*.md`` and ``qa.jsonl``), so its metric and benchmarks take it as they are:

    .venv/bin/python benchmarks/bench_defaults.py --docs ../shared/data/claude-docs-qa ~/.cache/eddi-rag/held-out/attrs-docs-qa
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

PACKAGE, VERSION = "attrs", "24.3.0"
QUESTIONS = Path(__file__).resolve().parent / "held_out" / "attrs-qa.jsonl"


def build(out: Path) -> Path:
    """The set under ``out`` (made once; a complete one is kept): its folder."""
    target = out / "attrs-docs-qa"
    if (target / "qa.jsonl").is_file():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps", "-q", "-d", tmp,
                        f"{PACKAGE}=={VERSION}"], check=True)
        (sdist,) = Path(tmp).glob(f"{PACKAGE}-{VERSION}.tar.gz")
        docs = target / "docs"
        docs.mkdir(parents=True, exist_ok=True)
        with tarfile.open(sdist) as archive:
            for member in archive.getmembers():
                path = Path(member.name)
                if member.isfile() and path.parent.name == "docs" and path.suffix == ".md" and len(path.parts) == 3:
                    (docs / path.name).write_bytes(archive.extractfile(member).read())  # type: ignore[union-attr]
    qa = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    for q in qa:
        page = (target / "docs" / q["page"]).read_text()
        missing = [r for r in q["reference_passages"] if r not in page]
        if missing:
            raise SystemExit(f"{q['id']}: its passage is not in {q['page']} of {PACKAGE} {VERSION}: {missing[0][:80]!r}")
    (target / "qa.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qa))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path.home() / ".cache" / "eddi-rag" / "held-out")
    print(build(parser.parse_args().out))


if __name__ == "__main__":
    main()
