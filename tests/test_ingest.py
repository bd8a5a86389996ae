from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eddi_rag.config import RagConfiguration
from eddi_rag.ingest import pipeline
from eddi_rag.ingest.chunking import Piece, _segmenter, sentences, split_document, split_text
from eddi_rag.ingest.tokens import budget_for
from eddi_rag.runtime import Runtime

DOC = "\n\n".join(f"Paragraph {i}. " + f"Sentence about topic {i}. " * 12 for i in range(12))


def test_recursive_chunking_respects_size_and_overlap():
    chunks = split_text(DOC, RagConfiguration(name="x", chunkStrategy="recursive", chunkSize=200, chunkOverlap=40))
    assert len(chunks) > 10 and all(len(c) <= 200 for c in chunks)
    assert any(a[-20:] in b for a, b in zip(chunks, chunks[1:]))  # neighbours overlap


@pytest.mark.parametrize("strategy", ["paragraph", "sentence"])
def test_other_strategies_stay_within_size(strategy):
    chunks = split_text(DOC, RagConfiguration(name="x", chunkStrategy=strategy, chunkSize=300, chunkOverlap=0))
    assert chunks and all(len(c) <= 300 for c in chunks)


GUIDE = """# Night trains

Everything about travelling by night.

## Booking

""" + "Tickets open 180 days ahead and sell out fast in summer. " * 6 + """

```
## a code comment, not a heading
```

## On board

### Sleeper cabins

""" + "Cabins have one, two or three beds, with towels and water. " * 14 + """

""" + "The attendant serves breakfast in the cabin before arrival. " * 14 + """

### Seats

Seats recline and cost less.
"""


def markdown(**overrides) -> RagConfiguration:
    return RagConfiguration(name="x", chunkStrategy="markdown", embeddingProvider="local", **overrides)


def test_markdown_keeps_a_document_whole_while_it_fits_the_model_unless_it_has_sections():
    short = "# Title\n\nOne short section.\n\n## Part\n\nAnother."
    assert split_document(short, markdown()) == [Piece(short, "# Title")]  # (it knows its title)
    three = "# Title\n\nThree short ones.\n\n### A\n\nOne.\n\n### B\n\nTwo."  # (### only: kept whole)
    assert split_document(three, markdown()) == [Piece(three, "# Title", {"sections": ["A", "B"]})]
    sections = "# Title\n\n## One\n\nFirst.\n\n## Two\n\nSecond."  # two sections: each its own chunk (issue 45)
    assert split_document(sections, markdown()) == [Piece("# Title > ## One\n\nFirst.", "# Title > ## One"),
                                                    Piece("# Title > ## Two\n\nSecond.", "# Title > ## Two")]


def test_markdown_splits_at_headings_with_the_heading_path():
    budget = budget_for(markdown())
    assert budget.tokenizer == "model" and budget.limit == 256 and budget.count(GUIDE) > 256
    pieces = split_document(GUIDE, markdown())
    assert [p.section for p in pieces] == [
        "# Night trains", "# Night trains > ## Booking",
        "# Night trains > ## On board > ### Sleeper cabins", "# Night trains > ## On board > ### Sleeper cabins",
        "# Night trains > ## On board > ### Seats",
    ]
    assert all(p.text.startswith(p.section + "\n\n") and budget.count(p.text) <= 256 for p in pieces)
    assert "## a code comment, not a heading" in pieces[1].text  # code blocks are not headings
    cabins = pieces[2].text.split("\n\n", 1)[1]
    assert cabins == ("Cabins have one, two or three beds, with towels and water. " * 14).strip()  # never mid-paragraph


WORDS = st.sampled_from(["train", "night", "Dr.", "e.g.", "U.S.", "café", "naïve", "中文", "x" * 120, "3.5", "(see", "below)",
                         "well-known", "don't", "…", "!", "?", "# not", "**bold**", "`code`", "\u0301", "İstanbul", "ﬁne"])
TEXTS = st.lists(st.lists(st.lists(WORDS, min_size=1, max_size=30).map(" ".join).map(lambda s: s + "."), min_size=1,
                          max_size=12).map(" ".join), min_size=1, max_size=6).map("\n\n".join)


@settings(max_examples=60)
@given(text=TEXTS, title=st.sampled_from(["", "# Guide\n\n## Part\n\n"]), limit=st.sampled_from([16, 40, 256]))
def test_markdown_chunks_are_the_same_whether_counts_add_up_or_each_join_is_counted(text, title, limit):
    """The local model's counts add up over whitespace (each sentence is counted once, not every growing join
    again): the chunks are exactly those counted join by join."""
    budget = replace(budget_for(markdown()), limit=limit)
    assert budget.specials == 2  # ([CLS] and [SEP])
    assert split_document(title + text, markdown(), budget) == split_document(title + text, markdown(),
                                                                              replace(budget, specials=None))


@settings(max_examples=60)
@given(text=TEXTS)
def test_sentences_are_pysbds_found_without_a_regular_expression_each(text):
    assert sentences(text) == [s.strip() for s in _segmenter().segment(text) if s.strip()]


@pytest.mark.parametrize("language, text", [
    ("en", "Dr. Smith took the 10 p.m. train to Washington D.C. on Jan. 5th, e.g. the night one. Did it stop? It did! "),
    ("de", "Der Zug fuhr z. B. am 3. Oktober um 22 Uhr ab, d. h. pünktlich. Hielt er in Linz? Ja! "),
    ("fr", "M. Dupont a pris le train de nuit, p. ex. celui de 22 h. S'est-il arrêté ? Oui ! "),
    ("ja", "夜行列車は二十二時に出発します。途中で止まりますか？はい、リンツで止まります！"),
])
def test_a_long_paragraph_is_split_a_window_at_a_time_into_the_same_sentences(language, text, monkeypatch):
    """pysbd's time grows with the square of a paragraph's length (a paragraph of 150,000 characters took 23 s): a long
    one is split a window at a time, each window's last sentence taken again, and the sentences are the same."""
    from eddi_rag.ingest import chunking

    paragraph = text * 40
    with chunking.in_language(language):
        whole = [s.strip() for s in _segmenter(language).segment(paragraph) if s.strip()]
        monkeypatch.setattr(chunking, "SENTENCE_WINDOW", 150)
        assert sentences(paragraph) == whole and len(whole) > 40


def test_a_long_paragraph_without_a_full_stop_comes_in_pieces_cut_at_spaces(monkeypatch):
    from eddi_rag.ingest import chunking

    monkeypatch.setattr(chunking, "SENTENCE_WINDOW", 100)
    paragraph = "words and more " * 200
    pieces = sentences(paragraph)
    assert len(pieces) > 10 and " ".join(pieces) == paragraph.strip()
    assert all(set(p.split(" ")) <= {"words", "and", "more"} and len(p) <= 210 for p in pieces)  # (no word cut; the last up to two windows)


def test_markdown_counts_cl100k_tokens_offline_for_openai_models():
    budget = budget_for(RagConfiguration(name="x", embeddingProvider="openai"))
    assert budget.tokenizer == "cl100k_base" and budget.limit == 8191 and budget.count("hello world") == 2
    assert budget.specials is None  # (BPE merges across a join: every join is counted)
    pieces = split_document(GUIDE, RagConfiguration(name="x", chunkStrategy="markdown", embeddingProvider="openai"))
    # the guide fits 8191 tokens, and is cut at its sections (not at the code block's "## a code comment", nor ###)
    assert [p.section for p in pieces] == ["# Night trains", "# Night trains > ## Booking", "# Night trains > ## On board"]


def test_paragraph_strategy_never_cuts_a_paragraph_that_fits():
    paras = [f"Paragraph {i} " + "word " * (5 + 4 * i) for i in range(6)]
    pieces = split_text("\n\n".join(paras), RagConfiguration(name="x", chunkStrategy="paragraph", chunkSize=150, chunkOverlap=0))
    assert all(len(p) <= 150 for p in pieces)
    assert sorted(q.strip() for p in pieces for q in p.split("\n\n")) == sorted(p.strip() for p in paras)


def test_sentence_strategy_packs_whole_sentences_with_overlap():
    text = " ".join(f"Sentence number {i} is here." for i in range(30))
    pieces = split_text(text, RagConfiguration(name="x", chunkStrategy="sentence", chunkSize=120, chunkOverlap=40))
    assert len(pieces) > 3 and all(len(p) <= 120 for p in pieces)
    assert all(p.startswith("Sentence number") and p.endswith("is here.") for p in pieces)
    assert all(a.split(". ")[-1] in b for a, b in zip(pieces, pieces[1:]))  # the last sentence opens the next chunk


def test_chunks_carry_source_document_position_and_section(runtime):
    kb = runtime.resources.create("rags", {"name": "kb", "embeddingProvider": "local", "storeType": "sqlite",
                                           "chunkStrategy": "markdown"}).id
    runtime.ingest(kb, "night-trains.md", GUIDE)
    chunks = runtime.stores.get(kb, runtime.rag_config(kb)).get({"document_id": "night-trains.md"})
    assert [c.metadata["position_in_doc"] for c in chunks] == list(range(5))
    assert chunks[2].metadata["section"] == "# Night trains > ## On board > ### Sleeper cabins"
    assert all(c.metadata["source"] == "night-trains.md" for c in chunks)


def rag(runtime: Runtime, **overrides) -> str:
    config = {"name": "kb", "embeddingProvider": "local", "storeType": "sqlite", "chunkStrategy": "recursive", "chunkSize": 200,
              "chunkOverlap": 20, **overrides}
    return runtime.resources.create("rags", config).id


def test_reingesting_a_document_replaces_its_chunks(runtime):
    kb = rag(runtime)
    first = runtime.ingest(kb, "guide.md", DOC)
    runtime.ingest(kb, "other.md", "Completely different content about volcanoes.")
    second = runtime.ingest(kb, "guide.md", "A much shorter guide about tea.")
    store = runtime.stores.get(kb, runtime.rag_config(kb))
    assert first > 1 and second == 1
    assert store.count({"source": "guide.md"}) == 1  # no stale chunks, no duplicates
    assert store.count({"source": "other.md"}) == 1
    assert [c.text for c in store.get({"source": "guide.md"})] == ["A much shorter guide about tea."]
    meta = store.get({"source": "other.md"})[0].metadata
    assert {k: meta.pop(k) for k in ("content_hash", "ingestedAt")}
    assert meta == {"source": "other.md", "kbId": kb, "document_id": "other.md", "position_in_doc": 0, "language": "en"}


@pytest.mark.integration
def test_a_failure_half_way_leaves_the_previous_version_whole(runtime, openai_server, monkeypatch):
    monkeypatch.setattr(pipeline, "EMBED_BATCH", 4)
    kb = rag(runtime, embeddingProvider="openai",
             embeddingParameters={"apiKey": "sk", "baseUrl": openai_server.base_url, "maxRetries": 0})
    runtime.ingest(kb, "guide.md", "The original guide.")
    store = runtime.stores.get(kb, runtime.rag_config(kb))
    before = [(c.id, c.text) for c in store.get()]
    openai_server.fail_next = [500] * 3  # every attempt at the first batch of the new version fails
    with pytest.raises(Exception):  # noqa: B017 - the provider's error, whatever its type
        runtime.ingest(kb, "guide.md", DOC)
    assert [(c.id, c.text) for c in store.get()] == before
    openai_server.fail_next = []
    runtime.ingest(kb, "guide.md", DOC)
    assert store.count({"source": "guide.md"}) > 4


def test_ingestion_jobs_complete_or_fail_with_a_message(runtime):
    kb = rag(runtime)
    runtime.jobs.start()
    ok = runtime.jobs.submit(kb, 1, "doc.md", "Some text about trains.")
    assert ok.status == "pending"
    bad = runtime.jobs.submit(kb, 1, "blank.md", "   ")
    assert runtime.jobs.wait_idle(60)
    done = runtime.jobs.status(ok.id)
    assert done.status == "completed" and done.chunks == 1
    assert runtime.jobs.status(bad.id).status == "failed: document 'blank.md': text is empty"
    assert runtime.jobs.status("nope") is None


def test_ingestion_statuses_and_pending_jobs_survive_a_restart(tmp_path):
    first = Runtime(tmp_path)
    kb = rag(first)
    done = first.jobs.submit(kb, 1, "a.md", "Text about apples.")
    first.jobs.process(done.id)
    waiting = first.jobs.submit(kb, 1, "b.md", "Text about bananas.")  # no worker ran it
    first.close()

    second = Runtime(tmp_path)
    try:
        assert second.jobs.status(done.id).status == "completed"
        assert second.jobs.status(waiting.id).status == "pending"
        second.jobs.start()
        assert second.jobs.wait_idle(60)
        assert second.jobs.status(waiting.id).status == "completed"
        assert [h.metadata["source"] for h in second.query(kb, "bananas", min_score=0)][:1] == ["b.md"]
    finally:
        second.close()


@pytest.mark.integration
def test_reingesting_unchanged_text_calls_no_provider(runtime, openai_server):
    kb = rag(runtime, embeddingProvider="openai", embeddingParameters={"apiKey": "sk", "baseUrl": openai_server.base_url})
    runtime.ingest(kb, "guide.md", DOC)
    calls = len(openai_server.calls("/embeddings"))
    assert calls >= 1
    runtime.ingest(kb, "guide.md", DOC)
    runtime.ingest(kb, "copy.md", DOC)  # same text under another name: same vectors
    assert len(openai_server.calls("/embeddings")) == calls
