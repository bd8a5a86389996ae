"""The chunking preview: the chunks a configuration would make of a document, embedding nothing."""

from __future__ import annotations

from typing import Any

from eddi_rag.config import RagConfiguration
from eddi_rag.ingest.chunking import fit_spec, ocr_spec, split_parts
from eddi_rag.ingest.limits import DocumentLimits
from eddi_rag.ingest.parsing import parse
from eddi_rag.ingest.tokens import budget_for


def preview_chunks(config: RagConfiguration, document: str, data: bytes, fmt: str,
                   limits: DocumentLimits | None = None) -> dict[str, Any]:
    """{chunks: [{position, text, chars, tokens, section?, citation}], tokenLimit, tokenizer, overLimit};
    the file parsed as ingestion parses it (a limited process; ``limits``: default from the environment)."""
    limits = limits or DocumentLimits.from_env()
    budget = budget_for(config)
    parts = parse(fmt, data, document, fit_spec(config), limits, ocr=ocr_spec(config))
    pieces = split_parts(parts, config, budget)
    if len(pieces) > limits.max_chunks:
        raise limits.over("max_chunks", f"the document makes {len(pieces):,} chunks")
    chunks: list[dict[str, Any]] = []
    for i, piece in enumerate(pieces):
        chunks.append({"position": i, "text": piece.text, "chars": len(piece.text), "tokens": budget.count(piece.text),
                       "citation": piece.citation, **({"section": piece.section} if piece.section else {})})
    return {"document": document, "format": fmt, "chunkStrategy": config.chunkStrategy, "chunks": chunks,
            "tokenLimit": budget.limit, "tokenizer": budget.tokenizer,
            "overLimit": sum(1 for c in chunks if c["tokens"] > budget.limit)}
