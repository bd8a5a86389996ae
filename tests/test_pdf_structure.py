"""A PDF's own structure (issue 32, point 3): a manual printed by headless Chromium with its outline (bookmarks),
numbered headings, a two-column section, hyphenation at line ends and Chromium's running header and footer
(date, title, file URL, page numbers). Its chunks carry the heading path as ``section``, a section that runs over
a page break keeps it, the columns read one after the other, and no header, footer or page number reaches a
chunk."""

from __future__ import annotations

import subprocess
import tempfile
from pathlib import Path

import pytest

from eddi_rag.runtime import Runtime
from tests.support.kbs import make_kb
from tests.support.scans import CHROMIUM

pytestmark = pytest.mark.integration  # Chromium prints; the PDF is parsed in the parse process

FILLER = " ".join(["The espresso machine keeps its boiler at a steady temperature while it brews."] * 70)
HTML = f"""<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Espresso EX-9 Manual</title>
<style>body{{font-family:'DejaVu Sans';font-size:11pt;margin:1.5cm}} h1{{font-size:22pt}} h2{{font-size:16pt}}
h3{{font-size:13pt}} .cols{{column-count:2;column-gap:1cm}}</style></head><body>
<h1>Espresso EX-9 Manual</h1>
<h2>1. Safety Procedures</h2>
<p>Always unplug the machine before cleaning. Keep children away from the steam wand, which reaches 130 degrees.</p>
<h3>1.1 Electrical safety</h3>
<p>Use a grounded outlet rated for 16 amperes. {FILLER}</p>
<p>Never use extension cords with the EX-9: the heating element draws its full current at once.</p>
<h2>2. Setup</h2>
<div class="cols"><p>LEFTCOLUMN Unpack the machine and remove all protective foam from the water tank and the drip tray
before first use. Rinse every removable part with warm water and place the machine on a flat surface.</p>
<p>RIGHTCOLUMN Fill the water tank to the MAX mark with fresh cold water, insert it firmly, and switch the machine
on with the main switch at the back. Wait until the orange light stops blinking.</p></div>
<h3>2.3 Grinder settings</h3>
<p>Turn the grinder dial to position five for espresso. Professional baristas recommend experi-<br>mentation
with extraordinarily uncon-<br>ventional combinations (a typesetter's hyphens at the ends of lines).</p>
</body></html>"""


@pytest.fixture(scope="module")
def manual() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        source, out = Path(folder) / "manual.html", Path(folder) / "manual.pdf"
        source.write_text(HTML, encoding="utf-8")
        subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--generate-pdf-document-outline",
                        f"--user-data-dir={folder}/profile", f"--print-to-pdf={out}", source.as_uri()],
                       check=True, capture_output=True, timeout=120)  # (with Chromium's header and footer)
        return out.read_bytes()


def test_a_pdf_s_headings_become_sections_over_page_breaks_without_headers_or_footers(tmp_path, manual):
    import io

    from pypdf import PdfReader

    assert len(PdfReader(io.BytesIO(manual)).pages) >= 2 and PdfReader(io.BytesIO(manual)).outline
    with Runtime(tmp_path) as runtime:
        kb = make_kb(runtime, "Manual", chunkStrategy="recursive", chunkSize=400, chunkOverlap=0, minScore=0)
        runtime.ingest_file(kb, "manual.pdf", manual)
        chunks = runtime.stores.get(kb, runtime.rag_config(kb)).get({"source": "manual.pdf"})
    by_text = {c.text: c.metadata for c in chunks}
    section = lambda needle: next(m.get("section") for t, m in by_text.items() if needle in t)  # noqa: E731
    assert section("130 degrees") == "# Espresso EX-9 Manual > ## 1. Safety Procedures"
    assert section("Never use extension cords") == "# Espresso EX-9 Manual > ## 1. Safety Procedures > ### 1.1 Electrical safety"
    assert next(m["page"] for t, m in by_text.items() if "Never use extension cords" in t) >= 2  # after the page break
    assert section("LEFTCOLUMN") == "# Espresso EX-9 Manual > ## 2. Setup"
    text = "\n".join(by_text)
    assert text.index("LEFTCOLUMN") < text.index("place the machine on a flat surface") < text.index("RIGHTCOLUMN")
    assert "recommend experimentation with" in text and "unconventional combinations" in text and "fi" in text and "\ufb01" not in text  # ligatures spelled out
    assert "file://" not in text and "/2" not in text.split("RIGHTCOLUMN")[0][-20:]
    assert not any("AM Espresso" in t or "PM Espresso" in t for t in by_text)  # Chromium's running header
