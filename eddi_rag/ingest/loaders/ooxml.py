"""Office Open XML as ISO/IEC 29500 *Strict* writes it (Word's "Strict Open XML Document"), read as the common
(Transitional) form the readers know: Strict names the same parts and elements under ``http://purl.oclc.org/ooxml/…``
where Transitional has ``http://schemas.openxmlformats.org/…/2006/…`` (ECMA-376 Part 1, annex A), including the
relationship types that say which part is the document."""

from __future__ import annotations

import io
import re
import zipfile

from eddi_rag.ingest.loaders import rewritten

_STRICT = re.compile(rb"http://purl\.oclc\.org/ooxml/(\w+)/(\w+)")
_RENAMED = {b"extendedProperties": b"extended-properties", b"customProperties": b"custom-properties"}


def as_transitional(data: bytes) -> bytes:
    """The package as Transitional names it: a Strict one (its relationships name Strict's namespaces) with every XML
    part's namespaces and relationship types renamed, any other unchanged."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as package:
            strict = b"purl.oclc.org/ooxml/" in package.read("_rels/.rels")
    except (zipfile.BadZipFile, KeyError, OSError):
        return data  # (not a package it can read: the reader says why)
    return rewritten(data, _renamed) if strict else data


def _renamed(name: str, part: bytes) -> bytes:
    if not name.endswith((".xml", ".rels")):
        return part
    return _STRICT.sub(lambda m: b"http://schemas.openxmlformats.org/" + m.group(1) + b"/2006/"
                       + _RENAMED.get(m.group(2), m.group(2)), part)
