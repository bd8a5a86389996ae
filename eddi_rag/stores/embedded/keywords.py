"""A knowledge base's chunk texts under BM25, for the ``sqlite`` store's keyword search: a tantivy index (the
Lucene-style engine, through tantivy-py; English stemming), held in memory beside the store's in-memory rows and
kept current by each write made through this process (the chunks written added, the ones replaced or deleted
taken out). When another process wrote, it is built again from the database at the next keyword search.

Measured against FTS5's ``bm25()`` over every matching row (``benchmarks/bench_keyword.py``, NFCorpus): 0.64 ms
against 39 ms p50 at 100,000 chunks through the store, nDCG@10 0.2733 against 0.2718. The filters stay exact: the index names
candidates, best first, and the store's rows decide which pass."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

import tantivy

WORD = re.compile(r"\w+")
BUILD_HEAP, WRITE_HEAP = 64_000_000, 15_000_000  # a writer's indexing buffer, while it builds or writes (15 MB: tantivy's least)


class KeywordIndex:
    def __init__(self, rows: Iterable[tuple[str, str]]):
        """``rows``: (chunk id, text) of every chunk of the knowledge base."""
        builder = tantivy.SchemaBuilder()
        builder.add_text_field("id", stored=True, tokenizer_name="raw")
        builder.add_text_field("text", tokenizer_name="en_stem")
        self.index = tantivy.Index(builder.build())
        writer = self.index.writer(heap_size=BUILD_HEAP, num_threads=1)
        for id, text in rows:
            writer.add_document(tantivy.Document(id=id, text=text))
        self._commit(writer)

    def _commit(self, writer: tantivy.IndexWriter) -> None:
        """Commit, and let the writer go: a writer holds its threads and buffer (about 7 MB and 6 threads), which
        a server with many knowledge bases cannot keep for each."""
        writer.commit()
        writer.wait_merging_threads()
        self.index.reload()
        self.searcher = self.index.searcher()

    def write(self, gone: Sequence[str], written: Sequence[tuple[str, str]]) -> None:
        """The chunks ``gone`` taken out, ``written`` (id, text) put in (replacing any of the same id)."""
        writer = self.index.writer(heap_size=WRITE_HEAP, num_threads=1)
        for id in {*gone, *(id for id, _ in written)}:
            writer.delete_documents_by_term("id", id)
        for id, text in written:
            writer.add_document(tantivy.Document(id=id, text=text))
        self._commit(writer)

    def search(self, text: str, n: int) -> list[tuple[str, float]]:
        """(chunk id, BM25 score) of the best ``n`` chunks holding any of the words of ``text``, best first."""
        words = WORD.findall(text)
        if not words or n <= 0:
            return []
        query = self.index.parse_query(" OR ".join(f'"{w}"' for w in dict.fromkeys(words)), ["text"])  # (quoted: no syntax)
        hits = self.searcher.search(query, n).hits
        return [(self.searcher.doc(address)["id"][0], float(score)) for score, address in hits]
