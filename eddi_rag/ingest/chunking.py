"""Split a document into chunks with langchain-text-splitters, per ``chunkStrategy``."""

from __future__ import annotations

from langchain_text_splitters import RecursiveCharacterTextSplitter

from eddi_rag.config import RagConfiguration

# Separators tried in order. "paragraph" never breaks inside a paragraph that fits;
# "sentence" prefers sentence ends over other whitespace.
_SEPARATORS = {
    "recursive": ["\n\n", "\n", " ", ""],
    "paragraph": ["\n\n", "\n", " ", ""],
    "sentence": ["\n\n", "\n", r"(?<=[.!?])\s+", " ", ""],
}


def split_text(text: str, config: RagConfiguration) -> list[str]:
    strategy = config.chunkStrategy
    if strategy not in _SEPARATORS:
        raise ValueError(f"chunkStrategy {strategy!r} is not supported; use one of {', '.join(_SEPARATORS)}")
    splitter = RecursiveCharacterTextSplitter(
        chunk_size=config.chunkSize,
        chunk_overlap=0 if strategy == "paragraph" else config.chunkOverlap,
        separators=_SEPARATORS[strategy],
        is_separator_regex=strategy == "sentence",
        keep_separator=strategy != "sentence",
        strip_whitespace=True,
    )
    return [c for c in splitter.split_text(text) if c.strip()]
