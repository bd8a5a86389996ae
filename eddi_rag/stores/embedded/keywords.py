"""A knowledge base's chunk texts under BM25, for the ``sqlite`` store's keyword search: a tantivy index (the
Lucene-style engine, through tantivy-py), kept current by each write (the chunks written added, the ones replaced or
deleted taken out). The ``sqlite`` store keeps it on disk beside its file, one index every process maps; the
in-memory store and pgvector's keyword side hold theirs in memory.

Measured against FTS5's ``bm25()`` over every matching row (``benchmarks/bench_keyword.py``, NFCorpus): 0.64 ms
against 39 ms p50 at 100,000 chunks through the store, nDCG@10 0.2733 against 0.2718. The filters stay exact: the index names
candidates, best first, and the store's rows decide which pass. Who may read a chunk (its ``acl``: retrieval.access) is
indexed too and decided inside tantivy's query, so a reader who may read a tenth of the chunks is not handed the
other nine tenths first (the clause scores nothing: BM25 stays as it was).

Each chunk is analysed in its language (``metadata.language``; eddi_rag.stores.languages): a field per analysis,
Snowball's stemmer and stop words for the languages that have them, accents folded in Latin scripts, Chinese and the
other unspaced scripts as character pairs. A query is analysed as each language the index holds and asked of that
language's field, so a knowledge base of several languages finds each document in its own, and the query is terms,
never query syntax: any string is a query."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import tantivy

from eddi_rag.common.principals import ACL
from eddi_rag.stores import filters
from eddi_rag.stores.languages import LATIN, NEUTRAL, SNOWBALL, STOP_WORDS, analysis, spaced
from eddi_rag.stores.toolkit import string_lists

WORD = r"[\p{L}\p{M}\p{N}]+"  # a word: letters with their marks (Devanagari's vowel signs) and digits
MAX_TOKEN_BYTES = 40  # longer tokens are dropped, as tantivy's own analyzers do
BUILD_HEAP, WRITE_HEAP = 64_000_000, 15_000_000  # a writer's indexing buffer, while it builds or writes (15 MB: tantivy's least)


Row = tuple[str, str, Sequence[str], str | None]  # (chunk id, text, its acl's strings, its language)
Ranked = list[tuple[str, float]]  # (chunk id, BM25 score), best first


def acl_of(node: filters.Node | None) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    """What ``node`` requires of a chunk's ``acl``, as the keyword index can ask it: (one of these, none of these) from
    the ``$containsAny`` / ``$containsNone`` conditions an And requires (None: no such condition). Only ever less than
    ``node`` asks (one ``$containsAny`` of several): the rows' exact filter decides after."""
    holding: tuple[str, ...] | None = None
    lacking: tuple[str, ...] = ()
    for part in node.children if isinstance(node, filters.And) else [node] if node is not None else []:
        if isinstance(part, filters.And):
            inner_holding, inner_lacking = acl_of(part)
            holding, lacking = holding if holding is not None else inner_holding, lacking + inner_lacking
        elif isinstance(part, filters.Compare) and part.field == ACL and part.op == "$containsAny" and holding is None:
            holding = part.value
        elif isinstance(part, filters.Compare) and part.field == ACL and part.op == "$containsNone":
            lacking += part.value
    return holding, lacking


def keyword_row(id: str, text: str, metadata: dict[str, Any]) -> Row:
    """A chunk as the index takes it."""
    language = metadata.get("language")
    return id, text, string_lists(metadata).get("acl", []), language if isinstance(language, str) else None


def _analyzer(name: str) -> tantivy.TextAnalyzer:
    """The analysis called ``name`` (a Snowball stemmer's language, or NEUTRAL)."""
    codes = {code for code, stemmer in SNOWBALL.items() if stemmer == name}
    builder = (tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.regex(WORD)).filter(tantivy.Filter.remove_long(MAX_TOKEN_BYTES))
               .filter(tantivy.Filter.lowercase()))
    if codes & STOP_WORDS:
        builder = builder.filter(tantivy.Filter.stopword(name))
    if name != NEUTRAL:
        builder = builder.filter(tantivy.Filter.stemmer(name))
    if codes & LATIN:
        builder = builder.filter(tantivy.Filter.ascii_fold())
    return builder.build()


ANALYZERS = {name: _analyzer(name) for name in (NEUTRAL, *dict.fromkeys(SNOWBALL.values()))}
TERMS = tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build()  # the text field holds analysed terms


def terms(text: str, analysis: str) -> list[str]:
    """``text``'s terms under the analysis called ``analysis``."""
    return ANALYZERS[analysis].analyze(spaced(text))


def _schema() -> tantivy.Schema:
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("text", tokenizer_name="terms")
    builder.add_text_field("acl", tokenizer_name="raw")
    return builder.build()


class KeywordIndex:
    def __init__(self, rows: Iterable[Row], path: Path | None = None):
        """``rows``: (chunk id, text, acl strings, language) of every chunk of the knowledge base. ``path``: a folder of
        its own to keep the index in (what it held is replaced) instead of memory: tantivy maps its files, so every
        process that opens it (``opened``) reads one copy."""
        self.schema = _schema()
        if path is not None:
            path.mkdir(parents=True, exist_ok=True)
        self.index = tantivy.Index(self.schema, path=str(path), reuse=False) if path is not None else tantivy.Index(self.schema)
        self.index.register_tokenizer("terms", TERMS)
        self.analyses: set[str] = set()  # the analyses of the chunks written (a query is analysed as each)
        writer = self.index.writer(heap_size=BUILD_HEAP, num_threads=1)
        for row in rows:
            writer.add_document(self._document(row))
        self._commit(writer)

    @classmethod
    def opened(cls, path: Path, analyses: Iterable[str]) -> KeywordIndex:
        """The index kept in ``path`` (built there before, by this process or another), whose chunks were analysed
        as ``analyses``."""
        opened = cls.__new__(cls)
        opened.schema = _schema()
        opened.index = tantivy.Index(opened.schema, path=str(path), reuse=True)
        opened.index.register_tokenizer("terms", TERMS)
        opened.analyses = set(analyses)
        opened.refresh()
        return opened

    def refresh(self) -> None:
        """See what was committed since (by another process, to an index on disk)."""
        self.index.reload()
        self.searcher = self.index.searcher()

    def _document(self, row: Row) -> tantivy.Document:
        """A chunk analysed in its language before tantivy sees it: one field for every language, so BM25 weighs a
        word by how rare it is in the whole knowledge base (a field per language would let a language of one
        document, or one misjudged, rank it first for any word it holds)."""
        id, text, acl, language = row
        name = analysis(language)
        self.analyses.add(name)
        return tantivy.Document(id=id, text=" ".join(terms(text, name)), **({"acl": list(acl)} if acl else {}))

    def _commit(self, writer: tantivy.IndexWriter) -> None:
        """Commit, and let the writer go: a writer holds its threads and buffer (about 7 MB and 6 threads), which
        a server with many knowledge bases cannot keep for each."""
        writer.commit()
        writer.wait_merging_threads()
        self.refresh()

    def write(self, gone: Sequence[str], written: Sequence[Row]) -> None:
        """The chunks ``gone`` taken out, ``written`` (id, text, acl, language) put in (replacing any of the same id)."""
        writer = self.index.writer(heap_size=WRITE_HEAP, num_threads=1)
        for id in {*gone, *(row[0] for row in written)}:
            writer.delete_documents_by_term("id", id)
        for row in written:
            writer.add_document(self._document(row))
        self._commit(writer)

    def search(self, text: str, n: int, holding: Sequence[str] | None = None, lacking: Sequence[str] = ()) -> list[tuple[str, float]]:
        """(chunk id, BM25 score) of the best ``n`` chunks holding any of the words of ``text``, best first; ``holding``:
        only chunks whose acl holds one of these, ``lacking``: none of these (a reader's grants and denies)."""
        query = self._any_word(text)
        if query is None or n <= 0:
            return []
        if holding is not None or lacking:
            clauses = [(tantivy.Occur.Must, query)]
            if holding is not None:
                if not holding:
                    return []
                clauses.append((tantivy.Occur.Must, tantivy.Query.const_score_query(self._any_acl(holding), 0.0)))
            if lacking:
                clauses.append((tantivy.Occur.MustNot, self._any_acl(lacking)))
            query = tantivy.Query.boolean_query(clauses)
        hits = self.searcher.search(query, n).hits
        return [(self.searcher.doc(address)["id"][0], float(score)) for score, address in hits]

    def best(self, text: str, k: int, node: filters.Node | None, filtered: bool,
             passing: Callable[[Ranked], Ranked]) -> Ranked:
        """The best ``k`` chunks holding any of the words of ``text`` that the store's rows let pass (``passing``:
        those of the candidates that ``node`` keeps, in their order): the index names candidates best first, who may
        read them decided in its query (a reader is not handed the chunks of others first); more are asked while
        fewer than ``k`` passed and the index had more (``filtered``: the rows filter, so twice ``k`` at first)."""
        holding, lacking = acl_of(node)
        n = 2 * k if filtered else k
        while True:
            ranked = self.search(text, n, holding, lacking)
            picked = passing(ranked)[:k]
            if len(picked) >= k or len(ranked) < n:
                return picked
            n *= 8

    def scores(self, text: str, ids: Sequence[str]) -> dict[str, float]:
        """The BM25 score ``search`` gives each of ``ids`` that holds any of the words of ``text``."""
        query, ids = self._any_word(text), list(dict.fromkeys(ids))
        if query is None or not ids:
            return {}
        these = tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "id", i)) for i in ids])
        query = tantivy.Query.boolean_query([(tantivy.Occur.Must, query),
                                             (tantivy.Occur.Must, tantivy.Query.const_score_query(these, 0.0))])
        hits = self.searcher.search(query, len(ids)).hits
        return {self.searcher.doc(address)["id"][0]: float(score) for score, address in hits}

    def _any_word(self, text: str) -> tantivy.Query | None:
        """Chunks holding any of the terms of ``text`` as each language the index holds analyses it (term queries:
        no query syntax, any string is a query), None when it has none. A word that one of those languages drops
        as a stop word is dropped from all: else "de", dropped from every Spanish chunk, would match only the few
        chunks of no language as a rare word."""
        found: dict[str, None] = {}
        for word in dict.fromkeys(terms(text, NEUTRAL)):
            each = [ANALYZERS[name].analyze(word) for name in sorted(self.analyses)]
            if all(each):
                found.update(dict.fromkeys(term for analysed in each for term in analysed))
        clauses = [(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "text", term)) for term in found]
        return tantivy.Query.boolean_query(clauses) if clauses else None

    def _any_acl(self, values: Sequence[str]) -> tantivy.Query:
        """Chunks whose acl holds one of ``values``: a union of term queries, which tantivy intersects with the words'
        postings by skipping (a term set query builds a bitset of the whole index first: 1.9 against 1.1 ms a query
        at 100,000 chunks)."""
        return tantivy.Query.boolean_query([(tantivy.Occur.Should, tantivy.Query.term_query(self.schema, "acl", v))
                                            for v in dict.fromkeys(values)])
