"""Markdown: one part whose headings give each chunk its ``section``."""

from __future__ import annotations

from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part, decode_text


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    return [Part(decode_text(data), markdown=True)]
