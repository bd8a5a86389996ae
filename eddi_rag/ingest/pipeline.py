"""Ingest one document into one knowledge base: split, embed, replace its chunks atomically."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

from eddi_rag.config import RagConfiguration
from eddi_rag.factories import EmbeddingModelFactory, EmbeddingStoreFactory
from eddi_rag.ingest.chunking import split_text
from eddi_rag.stores.base import Chunk

EMBED_BATCH = 64


@dataclass
class IngestReport:
    kb_id: str
    document: str
    chunks: int


def chunk_id(kb_id: str, document: str, position: int) -> str:
    digest = hashlib.sha256(f"{kb_id}\x00{document}".encode()).hexdigest()[:16]
    return f"{digest}-{position:06d}"


class Ingestor:
    def __init__(self, embeddings: EmbeddingModelFactory, stores: EmbeddingStoreFactory):
        self.embeddings, self.stores = embeddings, stores

    def ingest_text(
        self,
        kb_id: str,
        config: RagConfiguration,
        document: str,
        text: str,
        progress: Callable[[int, int], None] | None = None,
    ) -> IngestReport:
        """Replace the chunks of ``document`` in the KB. The old chunks stay untouched until
        every new chunk is embedded, and the swap is one atomic store operation."""
        if not text.strip():
            raise ValueError(f"document {document!r} is empty")
        pieces = split_text(text, config)
        model = self.embeddings.for_config(config)
        vectors: list[list[float]] = []
        for start in range(0, len(pieces), EMBED_BATCH):
            vectors += model.embed_documents(pieces[start : start + EMBED_BATCH])
            if progress:
                progress(len(vectors), len(pieces))
        chunks = [
            Chunk(
                id=chunk_id(kb_id, document, i),
                text=piece,
                metadata={"source": document, "kbId": kb_id, "document_id": document, "position_in_doc": i},
                vector=vector,
            )
            for i, (piece, vector) in enumerate(zip(pieces, vectors))
        ]
        self.stores.get(kb_id, config).replace({"source": document}, chunks)
        return IngestReport(kb_id, document, len(chunks))
