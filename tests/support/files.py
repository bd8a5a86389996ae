"""Real office files made by the tests with the writers of the same libraries' ecosystems
(fpdf2, python-docx, python-pptx, openpyxl, pypdf): nothing mocked, nothing committed."""

from __future__ import annotations

import io


def pdf(pages: list[str]) -> bytes:
    from fpdf import FPDF

    doc = FPDF()
    doc.set_font("Helvetica", size=11)
    for text in pages:
        doc.add_page()
        doc.multi_cell(0, 6, text)
    return bytes(doc.output())


def scanned_pdf(pages: int = 2) -> bytes:
    """Pages with drawings only: what a scan without OCR looks like to a text extractor."""
    from fpdf import FPDF

    doc = FPDF()
    for _ in range(pages):
        doc.add_page()
        doc.rect(20, 20, 100, 60, style="F")
    return bytes(doc.output())


def encrypted_pdf(text: str, password: str = "s3cret", owner_only: bool = False, algorithm: str | None = None) -> bytes:
    """A PDF that asks ``password`` to be opened, or (``owner_only``) only to be changed: "copy-protected";
    ``algorithm``: pypdf's (``AES-256-R5``...), else its default."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf([text]))))
    writer.encrypt(user_password="" if owner_only else password, owner_password=password,
                   **({"algorithm": algorithm} if algorithm else {}))
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def docx_with_text_box(body: str, box: str) -> bytes:
    """A DOCX whose paragraph ``body`` anchors a text box holding ``box``, as Word writes one: a DrawingML shape
    (``wps:txbx``) with a VML copy of the same box for older readers (``mc:Fallback``). python-docx writes the
    document; the run with the box is the markup of ECMA-376 (python-docx has no call for it)."""
    import docx as python_docx
    from docx.oxml import parse_xml

    doc = python_docx.Document()
    paragraph = doc.add_paragraph(body)
    content = f'<w:txbxContent><w:p><w:r><w:t>{box}</w:t></w:r></w:p></w:txbxContent>'
    run = parse_xml(
        '<w:r xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main" '
        'xmlns:mc="http://schemas.openxmlformats.org/markup-compatibility/2006" '
        'xmlns:wp="http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing" '
        'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
        'xmlns:wps="http://schemas.microsoft.com/office/word/2010/wordprocessingShape" '
        'xmlns:v="urn:schemas-microsoft-com:vml"><mc:AlternateContent>'
        '<mc:Choice Requires="wps"><w:drawing><wp:anchor><wp:extent cx="2000000" cy="600000"/><wp:docPr id="1" name="Box 1"/>'
        '<a:graphic><a:graphicData uri="http://schemas.microsoft.com/office/word/2010/wordprocessingShape"><wps:wsp>'
        f'<wps:txbx>{content}</wps:txbx><wps:bodyPr/></wps:wsp></a:graphicData></a:graphic></wp:anchor></w:drawing>'
        f'</mc:Choice><mc:Fallback><w:pict><v:shape><v:textbox>{content}</v:textbox></v:shape></w:pict></mc:Fallback>'
        '</mc:AlternateContent></w:r>')
    paragraph._p.append(run)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def rewritten(data: bytes, change) -> bytes:  # noqa: ANN001 - (name, bytes) -> bytes
    """A zip package (an Office or OpenDocument file) with each part as ``change(its name, its bytes)`` makes it: how
    the tests write what their writers cannot (a Strict namespace, a chart type, a formula object)."""
    import zipfile

    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        for item in source.infolist():
            package.writestr(item, change(item.filename, source.read(item)))
    return out.getvalue()


def strict(data: bytes) -> bytes:
    """An Office Open XML package as Word's "Strict Open XML" saves it: each namespace and relationship type of the
    Transitional form named as ISO/IEC 29500 Strict names it (``http://purl.oclc.org/ooxml/…``; ECMA-376 Part 1,
    annex A)."""
    import re

    transitional = re.compile(rb"http://schemas\.openxmlformats\.org/(\w+)/2006/([\w-]+)")
    renamed = {b"extended-properties": b"extendedProperties", b"custom-properties": b"customProperties"}
    return rewritten(data, lambda name, part: transitional.sub(
        lambda m: b"http://purl.oclc.org/ooxml/" + m.group(1) + b"/" + renamed.get(m.group(2), m.group(2)), part)
        if name.endswith((".xml", ".rels")) else part)


def pptx_with_chart(slide_title: str, chart_title: str, series: str, values: dict[str, float]) -> bytes:
    """A one-slide deck with a titled column chart of one ``series`` (``values`` by category), python-pptx writing the
    chart with its data cache as PowerPoint does."""
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    slide.shapes.title.text = slide_title
    data = CategoryChartData()
    data.categories = list(values)
    data.add_series(series, tuple(values.values()))
    chart = slide.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(1), Inches(6), Inches(4), data).chart
    chart.has_title = True
    chart.chart_title.text_frame.text = chart_title
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def docx(blocks: list[tuple[str, str]]) -> bytes:
    """blocks: (style, text) with style "h1".."h3", "p", or "table" (text = rows joined by \\n, cells by |)."""
    import docx as python_docx

    doc = python_docx.Document()
    for style, text in blocks:
        if style.startswith("h"):
            doc.add_heading(text, level=int(style[1]))
        elif style == "table":
            rows = [r.split("|") for r in text.split("\n")]
            table = doc.add_table(rows=len(rows), cols=len(rows[0]))
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    table.cell(r, c).text = value
        else:
            doc.add_paragraph(text)
    out = io.BytesIO()
    doc.save(out)
    return out.getvalue()


def pptx(slides: list[tuple[str, str]], notes: dict[int, str] | None = None) -> bytes:
    from pptx import Presentation

    deck = Presentation()
    for n, (title, body) in enumerate(slides, 1):
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = title
        slide.placeholders[1].text = body
        if notes and n in notes:
            slide.notes_slide.notes_text_frame.text = notes[n]
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx(sheets: dict[str, list[list[object]]]) -> bytes:
    from openpyxl import Workbook

    book = Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


PNG = (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89"
       b"\x00\x00\x00\rIDATx\x9cc\xf8\xff\xff?\x00\x05\xfe\x02\xfe\xa7\x35\x81\x84\x00\x00\x00\x00IEND\xaeB`\x82")
# a 1×1 GIF: an image of a kind no loader reads (PNG, JPEG, TIFF, WebP and BMP are read by OCR)
GIF = b"GIF87a\x01\x00\x01\x00\x81\x00\x00" + b"\x00" * 12 + b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x08\x04\x00\x01\x04\x04\x00;"
