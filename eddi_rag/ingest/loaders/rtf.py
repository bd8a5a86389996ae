"""RTF (striprtf): the document's text, its control words and groups removed."""

from __future__ import annotations

from collections.abc import Callable

from eddi_rag.ingest.loaders import Counter, Part, UnreadableDocumentError


def load(data: bytes, name: str, fits: Callable[[str], bool], meter: Counter) -> list[Part]:
    from striprtf.striprtf import rtf_to_text

    try:
        text = rtf_to_text(data.decode("cp1252", "replace"), errors="replace")  # RTF is 7-bit; \'xx escapes name cp1252
    except (ValueError, IndexError, LookupError) as e:
        raise UnreadableDocumentError(f"{name}: corrupt or unreadable RTF ({type(e).__name__}: {e})") from e
    return [Part(text.replace("\r\n", "\n").strip())]
