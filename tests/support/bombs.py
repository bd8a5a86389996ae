"""Hostile documents built by the tests: small on disk, huge when inflated or parsed. Nothing committed."""

from __future__ import annotations

import io
import json
import re
import zipfile

from tests.support import files

MB = 1024 * 1024


def _rezip(original: bytes, replace: dict[str, object]) -> bytes:
    """``original`` (a zip) with the entries named in ``replace`` written anew: bytes, or a function
    writing into the entry's stream (so a gigabyte is never held in memory)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(original)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as dst:
        for info in src.infolist():
            content = replace.get(info.filename)
            if content is None:
                dst.writestr(info, src.read(info))
            elif isinstance(content, bytes):
                dst.writestr(info.filename, content)
            else:
                with dst.open(info.filename, "w", force_zip64=True) as stream:
                    content(stream)  # type: ignore[operator]
    return out.getvalue()


def docx_inflating_to(mb: int) -> bytes:
    """A real DOCX whose word/document.xml unpacks to ``mb`` megabytes (whitespace inside the body)."""
    original = files.docx([("Normal", "A small document.")])
    with zipfile.ZipFile(io.BytesIO(original)) as z:
        xml = z.read("word/document.xml")
    head, _, tail = xml.partition(b"<w:body>")

    def write(stream) -> None:
        stream.write(head + b"<w:body>")
        block = b" " * MB
        for _ in range(mb):
            stream.write(block)
        stream.write(tail)

    return _rezip(original, {"word/document.xml": write})


def docx_lying_about_its_size(mb: int = 64) -> bytes:
    """A DOCX whose document.xml declares 1 KB in the zip's directory but inflates to ``mb`` MB."""
    import struct

    data = bytearray(docx_inflating_to(mb))
    name = b"word/document.xml"
    at = 0
    while (at := data.find(b"PK\x01\x02", at)) != -1:  # central directory entries
        if data[at + 46: at + 46 + len(name)] == name:
            # zip64: the real sizes are in the extra field; the 32-bit fields say 0xFFFFFFFF
            if struct.unpack_from("<I", data, at + 24)[0] != 0xFFFFFFFF:  # the 32-bit uncompressed size
                struct.pack_into("<I", data, at + 24, 1024)
            extra_len = struct.unpack_from("<H", data, at + 30)[0]
            extra = at + 46 + len(name)
            end = extra + extra_len
            while extra < end:
                tag, size = struct.unpack_from("<HH", data, extra)
                if tag == 1:
                    struct.pack_into("<Q", data, extra + 4, 1024)  # uncompressed size
                extra += 4 + size
        at += 4
    return bytes(data)


def csv_rows(rows: int) -> bytes:
    return b"id,name\n" + b"".join(b"%d,n%d\n" % (i, i) for i in range(rows))


def xlsx_rows(rows: int) -> bytes:
    """A real XLSX whose one sheet has ``rows`` rows (the sheet's XML written directly, streamed)."""
    original = files.xlsx({"Data": [["id", "name"], [1, "a"]]})
    with zipfile.ZipFile(io.BytesIO(original)) as z:
        sheet = next(n for n in z.namelist() if n.startswith("xl/worksheets/sheet"))
        xml = z.read(sheet).decode()
    xml = re.sub(r'<dimension ref="[^"]*"\s*/>', f'<dimension ref="A1:B{rows}"/>', xml)  # as a real sheet declares it
    head = xml[: xml.index("<sheetData>")] + "<sheetData>"
    tail = "</sheetData>" + xml[xml.index("</sheetData>") + len("</sheetData>"):]

    def write(stream) -> None:
        stream.write(head.encode())
        batch = []
        for r in range(1, rows + 1):
            batch.append(f'<row r="{r}"><c r="A{r}"><v>{r}</v></c><c r="B{r}" t="inlineStr"><is><t>n{r}</t></is></c></row>')
            if len(batch) == 10_000:
                stream.write("".join(batch).encode())
                batch = []
        stream.write("".join(batch).encode())
        stream.write(tail.encode())

    return _rezip(original, {sheet: write})


def nested_html(mb: int) -> bytes:
    depth = mb * MB // 11
    return b"<html><body>" + b"<div>" * depth + b"deep" + b"</div>" * depth + b"</body></html>"


def eddi_export_with_description(mb: int) -> bytes:
    """An EDDI agent export (v6 layout) whose agent descriptor's description is ``mb`` MB of text."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as z:
        z.writestr("bomb.agent.json", json.dumps({"workflows": []}))
        with z.open("bomb.descriptor.json", "w", force_zip64=True) as stream:
            stream.write(b'{"name": "bomb", "description": "')
            block = b"a" * MB
            for _ in range(mb):
                stream.write(block)
            stream.write(b'"}')
    return out.getvalue()
