"""A knowledge base's chunk texts under BM25, for the ``sqlite`` store's keyword search: a tantivy index (the
Lucene-style engine, through tantivy-py; English stemming), held in memory beside the store's in-memory rows and
kept current by each write made through this process (the chunks written added, the ones replaced or deleted
taken out). When another process wrote, it is built again from the database at the next keyword search.

Measured against FTS5's ``bm25()`` over every matching row (``benchmarks/bench_keyword.py``, NFCorpus): 0.35 ms
against 41 ms p50 at 100,000 chunks, nDCG@10 0.2733 against 0.2718. The filters stay exact: the index names
candidates, best first, and the store's rows decide which pass."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import tantivy

WORD = re.compile(r"\w+")
HEAP_BYTES = 64_000_000  # the writer's indexing buffer


class KeywordIndex:
    def __init__(self, rows: Iterable[tuple[str, str]]):
        """``rows``: (chunk id, text) of every chunk of the knowledge base."""
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("id", stored=True, tokenizer_name="raw")
        builder.add_text_field("text", tokenizer_name="en_stem")
        self.index = tantivy.Index(builder.build())
        self.writer = self.index.writer(heap_size=HEAP_BYTES, num_threads=1)
        for id, text in rows:
            self.writer.add_document(tantivy.Document(id=id, text=text))
        self._commit()

    def _commit(self) -> None:
        self.writer.commit()
        self.index.reload()
        self.searcher = self.index.searcher()

    def write(self, gone: Sequence[str], written: Sequence[tuple[str, str]]) -> None:
        """The chunks ``gone`` taken out, ``written`` (id, text) put in (replacing any of the same id)."""
        for id in {*gone, *(id for id, _ in written)}:
            self.writer.delete_documents_by_term("id", id)
        for id, text in written:
            self.writer.add_document(tantivy.Document(id=id, text=text))
        self._commit()

    def search(self, text: str, n: int) -> list[tuple[str, float]]:
        """(chunk id, BM25 score) of the best ``n`` chunks holding any of the words of ``text``, best first."""
        words = WORD.findall(text)
        if not words or n <= 0:
            return []
        query = self.index.parse_query(" OR ".join(f'"{w}"' for w in dict.fromkeys(words)), ["text"])  # (quoted: no syntax)
        hits = self.searcher.search(query, n).hits
        return [(self.searcher.doc(address)["id"][0], float(score)) for score, address in hits]

    def __len__(self) -> int:
        return int(self.searcher.num_docs)
