"""The chunking preview: the chunks a configuration would make of a document, embedding nothing."""

from __future__ import annotations

from typing import Any

from eddi_rag.config import RagConfiguration
from eddi_rag.ingest import loaders
from eddi_rag.ingest.chunking import fits_for, split_parts
from eddi_rag.ingest.tokens import budget_for


def preview_chunks(config: RagConfiguration, document: str, data: bytes, fmt: str) -> dict[str, Any]:
    """{chunks: [{position, text, chars, tokens, section?, citation}], tokenLimit, tokenizer, overLimit}."""
    budget = budget_for(config)
    parts = loaders.load(fmt, data, document, fits_for(config, budget))
    pieces = split_parts(parts, config, budget)
    chunks: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        chunks.append({"position": i, "text": piece.text, "chars": len(piece.text), "tokens": budget.count(piece.text),
                       "citation": piece.citation, **({"section": piece.section} if piece.section else {})})
    return {"document": document, "format": fmt, "chunkStrategy": config.chunkStrategy, "chunks": chunks,
            "tokenLimit": budget.limit, "tokenizer": budget.tokenizer,
            "overLimit": sum(1 for c in chunks if c["tokens"] > budget.limit)}
