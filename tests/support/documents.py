"""The formats people send (issue 32, point 5), written at run time with real tools and nothing committed: mail by
Python's ``email`` package (and as an Outlook ``.msg`` by aspose-email-foss's writer), EPUB by ebooklib,
OpenDocument text, spreadsheet and presentation by odfpy; RTF is a few lines of its own markup."""

from __future__ import annotations

import io
import os
import tempfile
from email.message import EmailMessage


def mail(subject: str, body: str, attachments: tuple[tuple[str, bytes | EmailMessage, str], ...] = (), html: str | None = None,
         sender: str = "Alice Example <alice@example.com>", to: str = "bob@example.com", cc: str | None = None,
         date: str = "Tue, 24 Nov 2026 10:00:00 +0100") -> EmailMessage:
    """A message with a plain-text body (and an HTML alternative), each attachment (name, bytes or an attached
    message, MIME type)."""
    message = EmailMessage()
    message["From"], message["To"], message["Subject"], message["Date"] = sender, to, subject, date
    if cc:
        message["Cc"] = cc
    message.set_content(body)
    if html is not None:
        message.add_alternative(html, subtype="html")
    for name, data, mime in attachments:
        if isinstance(data, EmailMessage):
            message.add_attachment(data, filename=name)
            continue
        main, sub = mime.split("/", 1)
        message.add_attachment(data, maintype=main, subtype=sub, filename=name)
    return message


def outlook(message: EmailMessage) -> bytes:
    """``message`` as an Outlook ``.msg`` file."""
    from aspose.email_foss import msg

    handle, path = tempfile.mkstemp(suffix=".msg")
    os.close(handle)
    try:
        msg.MapiMessage.from_email_message(message).save(path)
        with open(path, "rb") as f:
            return f.read()
    finally:
        os.unlink(path)


def epub_book(title: str, chapters: list[tuple[str, str]]) -> bytes:
    """A book of (chapter title, paragraph HTML) chapters, in reading order."""
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("eddi-rag-test")
    book.set_title(title)
    book.set_language("en")
    items = []
    for n, (heading, body) in enumerate(chapters, 1):
        chapter = epub.EpubHtml(title=heading, file_name=f"chapter{n}.xhtml", lang="en")
        chapter.content = f"<h1>{heading}</h1>{body}"
        book.add_item(chapter)
        items.append(chapter)
    book.toc = items
    book.spine = ["nav", *items]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    out = io.BytesIO()
    epub.write_epub(out, book)
    return out.getvalue()


def _saved(document) -> bytes:
    out = io.BytesIO()
    document.write(out)
    return out.getvalue()


def _row(values: list[str], repeat: int = 1):
    """An OpenDocument table row of text cells (an empty value: an empty cell), written once and read ``repeat`` times."""
    from odf.table import TableCell, TableRow
    from odf.text import P

    row = TableRow(numberrowsrepeated=repeat) if repeat > 1 else TableRow()
    for value in values:
        cell = TableCell()
        if value:
            cell.addElement(P(text=value))
        row.addElement(cell)
    return row


def odt(blocks: list[tuple[str, str]]) -> bytes:
    """An OpenDocument text of ("h1"/"h2"/"p", text) blocks and a two-row table at its end."""
    from odf.opendocument import OpenDocumentText
    from odf.table import Table, TableColumn
    from odf.text import H, P

    document = OpenDocumentText()
    for what, text in blocks:
        document.text.addElement(H(outlinelevel=int(what[1]), text=text) if what.startswith("h") else P(text=text))
    table = Table(name="Prices")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    for row in (("Fare", "Price"), ("Flex", "89 EUR")):
        table.addElement(_row(list(row)))
    document.text.addElement(table)
    return _saved(document)


def odt_with_formula(before: str, after: str) -> bytes:
    """An OpenDocument text of two paragraphs with a formula object between them, its part written as LibreOffice
    Math writes one: a MathML document that names its DTD (``<!DOCTYPE math:math PUBLIC … "math.dtd">``). odfpy
    writes the text; the object is added to its package as LibreOffice lays one out (odfpy cannot write MathML)."""
    import zipfile

    from odf.opendocument import OpenDocumentText
    from odf.text import P

    from tests.support.files import rewritten

    document = OpenDocumentText()
    document.text.addElement(P(text=before))
    document.text.addElement(P(text=after))
    frame = (b'<text:p><draw:frame draw:name="Object1"><draw:object xlink:href="./Object 1" xlink:type="simple" '
             b'xlink:show="embed" xlink:actuate="onLoad"/></draw:frame></text:p>')

    def laid_out(name: str, data: bytes) -> bytes:
        if name == "META-INF/manifest.xml":
            return data.replace(b"</manifest:manifest>", b'<manifest:file-entry manifest:full-path="Object 1/content.xml" '
                                b'manifest:media-type="text/xml"/><manifest:file-entry manifest:full-path="Object 1/" '
                                b'manifest:media-type="application/vnd.oasis.opendocument.formula"/></manifest:manifest>')
        if name == "content.xml":
            return data.replace(f"<text:p>{after}".encode(), frame + f"<text:p>{after}".encode()).replace(
                b"<office:document-content ", b'<office:document-content xmlns:xlink="http://www.w3.org/1999/xlink" ', 1)
        return data

    out = io.BytesIO(rewritten(_saved(document), laid_out))
    with zipfile.ZipFile(out, "a") as package:
        package.writestr("Object 1/content.xml", '<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE math:math PUBLIC '
                         '"-//OpenOffice.org//DTD Modified W3C MathML 1.01//EN" "math.dtd">\n<math:math xmlns:math='
                         '"http://www.w3.org/1998/Math/MathML"><math:semantics><math:mrow><math:mi>E</math:mi><math:mo>=</math:mo>'
                         '<math:mi>m</math:mi></math:mrow><math:annotation math:encoding="StarMath 5.0">E = m</math:annotation>'
                         '</math:semantics></math:math>')
    return out.getvalue()


def ods(sheets: dict[str, list[list[str]]]) -> bytes:
    """An OpenDocument spreadsheet; each sheet's first row is its header; a repeated empty row closes each sheet,
    as office suites write one."""
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table, TableRow

    document = OpenDocumentSpreadsheet()
    for name, rows in sheets.items():
        table = Table(name=name)
        for row in rows:
            table.addElement(_row(row))
        table.addElement(TableRow(numberrowsrepeated=1048000))  # (an empty row, repeated to the sheet's end)
        document.spreadsheet.addElement(table)
    return _saved(document)


def ods_repeated_rows(rows: int) -> bytes:
    """A spreadsheet whose data rows are each written once and repeated (at most 1,000 times a row, as the loader
    reads a repeat), ``rows`` rows in all, in a few kilobytes."""
    from odf.opendocument import OpenDocumentSpreadsheet
    from odf.table import Table

    document = OpenDocumentSpreadsheet()
    table = Table(name="Sheet1")
    table.addElement(_row(["Product", "Note"]))
    for i in range(-(-rows // 1_000)):
        table.addElement(_row([f"Widget {i}", "A long note about the widget, repeated."], min(1_000, rows - i * 1_000)))
    document.spreadsheet.addElement(table)
    return _saved(document)


def odp_shapes() -> bytes:
    """A one-slide OpenDocument presentation as Impress lays one out beyond plain frames: a custom shape (a callout)
    holding its paragraph itself, a frame with a two-item list, a frame holding a table, and the footer its master page
    shows (a footer declaration the slide names), odfpy writing each."""
    from odf.draw import CustomShape, Frame, Page, TextBox
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import FooterDecl
    from odf.style import MasterPage, PageLayout
    from odf.table import Table, TableColumn
    from odf.text import List, ListItem, P

    document = OpenDocumentPresentation()
    layout = PageLayout(name="layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="master", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    footer = FooterDecl(name="ftr1")  # the footer text the master page's footer field shows on the slide
    footer.addText("Acme confidential")
    document.presentation.addElement(footer)
    page = Page(name="slide1", masterpagename=master, usefootername="ftr1")
    callout = CustomShape(width="8cm", height="3cm", x="1cm", y="1cm")
    callout.addElement(P(text="Callout: doors open at nine."))
    page.addElement(callout)
    listed = Frame(width="8cm", height="4cm", x="1cm", y="5cm")
    box, items = TextBox(), List()
    for item in ("Coffee in the lobby", "Lunch on the terrace"):
        entry = ListItem()
        entry.addElement(P(text=item))
        items.addElement(entry)
    box.addElement(items)
    listed.addElement(box)
    page.addElement(listed)
    tabled, table = Frame(width="8cm", height="4cm", x="10cm", y="5cm"), Table(name="Rooms")
    table.addElement(TableColumn(numbercolumnsrepeated=2))
    for row in (("Room", "Capacity"), ("Hall A", "120")):
        table.addElement(_row(list(row)))
    tabled.addElement(table)
    page.addElement(tabled)
    document.presentation.addElement(page)
    return _saved(document)


def odp(slides: list[tuple[str, str, str]]) -> bytes:
    """An OpenDocument presentation of (title, text, speaker notes) slides."""
    from odf.draw import Frame, Page, TextBox
    from odf.namespaces import PRESENTATIONNS
    from odf.opendocument import OpenDocumentPresentation
    from odf.presentation import Notes
    from odf.style import MasterPage, PageLayout
    from odf.text import P

    document = OpenDocumentPresentation()
    layout = PageLayout(name="layout")
    document.automaticstyles.addElement(layout)
    master = MasterPage(name="master", pagelayoutname=layout)
    document.masterstyles.addElement(master)
    for n, (title, text, notes) in enumerate(slides, 1):
        page = Page(name=f"slide{n}", masterpagename=master)
        for cls, value in (("title", title), ("outline", text)):
            frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
            frame.setAttrNS(PRESENTATIONNS, "class", cls)
            box = TextBox()
            box.addElement(P(text=value))
            frame.addElement(box)
            page.addElement(frame)
        if notes:
            note = Notes()
            frame = Frame(width="20cm", height="3cm", x="1cm", y="1cm")
            frame.setAttrNS(PRESENTATIONNS, "class", "notes")
            box = TextBox()
            box.addElement(P(text=notes))
            frame.addElement(box)
            note.addElement(frame)
            page.addElement(note)
        document.presentation.addElement(page)
    return _saved(document)


def rtf(paragraphs: list[str]) -> bytes:
    """An RTF document of plain paragraphs (``\\'xx`` escapes for cp1252 letters)."""
    def escaped(text: str) -> str:
        return "".join(ch if ord(ch) < 128 else f"\\'{ch.encode('cp1252')[0]:02x}" for ch in text)

    body = "".join(f"{{\\pard {escaped(p)}\\par}}\n" for p in paragraphs)
    return ("{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Times New Roman;}}\n" + body + "}").encode("ascii")
