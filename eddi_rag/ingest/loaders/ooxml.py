"""Office Open XML as ISO/IEC 29500 *Strict* writes it (Word's "Strict Open XML Document"), read as the common
(Transitional) form the readers know: Strict names the same parts and elements under ``http://purl.oclc.org/ooxml/…``
where Transitional has ``http://schemas.openxmlformats.org/…/2006/…`` (ECMA-376 Part 1, annex A), including the
relationship types that say which part is the document."""

from __future__ import annotations

import io
import re
import zipfile

_STRICT = re.compile(rb"http://purl\.oclc\.org/ooxml/(\w+)/(\w+)")
_RENAMED = {b"extendedProperties": b"extended-properties", b"customProperties": b"custom-properties"}


def is_strict(data: bytes) -> bool:
    """Whether a package's parts name Strict's namespaces (its relationships say so first)."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            return b"purl.oclc.org/ooxml/" in package.read("_rels/.rels")
    except (zipfile.BadZipFile, KeyError, OSError):
        return False


def transitional(data: bytes) -> bytes:
    """The package with every XML part's Strict namespaces and relationship types named as Transitional names them."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as source, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as copy:
        for item in source.infolist():
            part = source.read(item)
            if item.filename.endswith((".xml", ".rels")):
                part = _STRICT.sub(lambda m: b"http://schemas.openxmlformats.org/" + m.group(1) + b"/2006/"
                                   + _RENAMED.get(m.group(2), m.group(2)), part)
            copy.writestr(item, part)
    return out.getvalue()
