"""Citations that state their span (issue 22 point 1) and results whose order is explained (point 4): a
passage's label names what it covers (pages 1–3, rows 2–40, a heading path, the whole document), each hit
inside it is located by offsets, and a result that is not in score order says why."""

from __future__ import annotations

import pytest

from eddi_rag.answers.extractive import ExtractiveChatModel
from eddi_rag.common.citations import span
from eddi_rag.resource_types import resource_uri
from eddi_rag.retrieval.expansion import expand
from eddi_rag.retrieval.retriever import newest_first_among_equals
from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import Chunk, SearchHit, StoreContext
from eddi_rag.stores.embedded.memory import InMemoryStore
from eddi_rag.workflow.memory import ConversationMemory
from tests.test_workflow import RAG, TASK, make_agent, make_kb, step


def page_chunk(pos: int, page: int) -> Chunk:
    meta = {"document_id": "handbook.pdf", "position_in_doc": pos, "source": "handbook.pdf", "page": page}
    return Chunk(f"h-{pos:02d}", f"Paragraph {pos} on page {page} of the handbook.", meta, [1.0, float(pos)])


@pytest.fixture
def store():
    s = InMemoryStore("kb", {}, StoreContext(Database(":memory:")))
    s.upsert([page_chunk(i, i // 2 + 1) for i in range(10)])  # pages 1..5, two chunks each
    return s


def hit(c: Chunk) -> SearchHit:
    return SearchHit(c.id, c.text, c.metadata, 0.8)


def test_a_passage_label_names_the_pages_it_covers_and_locates_its_hit(store):
    (best,) = store.get(ids=["h-04"])  # page 3
    (p,) = expand(store, [hit(best)], "neighbors", neighbors=2)
    assert p.label == "handbook.pdf, pages 2–4; match: p. 3" and p.covers == "pages 2–4"  # the page a model can cite
    (located,) = p.hit_offsets()
    start, end = located["offsets"]
    assert p.text[start:end] == best.text and located["citation"] == "handbook.pdf, page 3"
    assert p.to_json()["citation"] == "handbook.pdf, pages 2–4; match: p. 3"


def test_a_passage_holding_every_chunk_names_its_pages_and_only_a_plain_text_says_whole_document(store):
    """Issue 33, point 1: "whole document" let a model cite no page; the label names the pages and the match's."""
    (best,) = store.get(ids=["h-04"])
    (p,) = expand(store, [hit(best)], "neighbors", neighbors=10)
    assert p.whole and p.label == "handbook.pdf, pages 1–5; match: p. 3"
    (bare,) = expand(store, [hit(best)], "none")
    assert bare.label == "handbook.pdf, page 3"  # a hit alone: its own place
    plain = InMemoryStore("plain", {}, StoreContext(Database(":memory:")))
    plain.upsert([Chunk(f"n-{i}", f"Note {i}.", {"document_id": "notes.txt", "position_in_doc": i, "source": "notes.txt"}, [1.0, float(i)])
                  for i in range(3)])
    (note,) = expand(plain, [hit(plain.get(ids=["n-1"])[0])], "neighbors", neighbors=5)
    assert note.label == "notes.txt, whole document"  # nothing in the document's own terms to name


def test_spans_of_rows_slides_and_sections():
    assert span([{"rows": "2-10"}, {"rows": "11-40"}]) == "rows 2–40"
    assert span([{"sheet": "Stocks", "row": 3}, {"sheet": "Stocks", "row": 9}]) == "Stocks, rows 3–9"
    assert span([{"slide": 2}, {"slide": 4}]) == "slides 2–4"
    assert span([{"section": "# Leave > ## Parental Leave"}, {"section": "# Leave > ## Parental Leave > ### Eligibility"}]) \
        == "# Leave > ## Parental Leave"
    assert span([{"section": "# Terms > ## 2 Billing"}, {"section": "# Other > ## 3 Support"}]) == "§2 Billing – §3 Support"
    assert span([{"page": 2}]) == "page 2" and span([{}, {}]) is None


def test_a_result_moved_by_the_recency_rule_says_so():
    older = SearchHit("old", "x", {"ingestedAt": 1.0}, 0.3576)  # score 0.6788
    newer = SearchHit("new", "y", {"ingestedAt": 2.0}, 0.3424)  # score 0.6712
    first, second = newest_first_among_equals([older, newer], 0.01)
    assert (first.id, second.id) == ("new", "old") and "recencyWindow" in first.ranking["tie"]
    assert newest_first_among_equals([newer, older], 0.01)[0].ranking is None  # already in that order


def test_rest_query_explains_the_order_and_the_hybrid_parts(client):
    runtime = client.runtime
    kb = make_kb(runtime, "Handbook", {"leave.md": "# Leave\n\n## Parental leave\n\nParents get 14 weeks of paid leave.\n\n"
                                                   "## Sick leave\n\nSick leave needs a note after three days."},
                 storeType="sqlite", minScore=0)
    assert runtime.knowledge_bases.get(kb).searchMode == "hybrid"
    r = client.post(f"/ragstore/rags/{kb}/query", json={"query": "How many weeks of parental leave?"}).json()
    assert r["order"].startswith("By score: 0.8 × vector + 0.2 × keyword score")
    best = r["results"][0]
    assert best["ranking"]["by"] == "weighted" and best["ranking"]["vector"]["rank"] >= 1
    assert best["ranking"]["keyword"]["rank"] >= 1 and "bm25" in best["ranking"]["keyword"]
    start, end = best["offsets"]
    assert best["passage"][start:end].strip() and best["passageCitation"].startswith("leave.md")


def test_the_llm_task_labels_the_passage_by_its_span_and_rag_citations_keep_it(runtime):
    text = "\n\n".join(f"## Part {i}\n\nFact {i}: the night train leaves at {20 + i % 4}:10." for i in range(3))
    kb = make_kb(runtime, "Guide", {}, chunkStrategy="paragraph", chunkSize=60, chunkOverlap=0, minScore=0, maxResults=2)
    runtime.ingest_file(kb, "guide.md", ("# Guide\n\n" + text).encode())
    agent = make_agent(runtime, [step(resource_uri("rags", kb, 1), RAG)])
    memory = ConversationMemory(agent, user_input="When does the night train leave?")
    runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Guide"}]}, ExtractiveChatModel())
    assert "[Source 1: guide.md, # Guide; match: §Part " in memory.get("rag:context:answer")
    (cited, *_) = memory.get("rag:citations:answer")
    assert cited["covers"] == "# Guide" and cited["known"]
    located = cited["hitOffsets"][0]
    assert located["citation"].startswith("guide.md, # Guide > ## Part") and len(located["offsets"]) == 2


def test_a_model_citing_the_page_it_read_is_a_known_citation():
    from eddi_rag.workflow.conversation import check_citations

    sources = [{"n": 1, "label": "[Source 1: handbook.pdf, pages 1–3; match: p. 2]", "source": "handbook.pdf"}]
    for cited in ("[Source 1]", "[Source 1: handbook.pdf]", "[Source 1: handbook.pdf, p. 2]", "[Source 1: handbook.pdf, pages 1–3; match: p. 2]"):
        assert check_citations(f"Refunds take 14 days {cited}.", sources, "t")[0]["known"], cited
    assert not check_citations("Refunds take 14 days [Source 1: other.pdf, p. 2].", sources, "t")[0]["known"]


def test_the_mark_covers_the_sentences_that_answer_not_the_whole_chunk(client):
    """Issue 33, point 1: the demo's Flex question; the chunk holds a heading and three sentences, the mark the two that
    share the question's terms, best match first in text order, never the heading."""
    runtime = client.runtime
    guide = ("# Miles\n\n## Earning miles\n\nEvery journey counts towards your status. Flex fares earn 8 miles per euro. "
             "Saver fares earn 2 miles per euro.\n\n## Spending miles\n\nMiles buy upgrades and lounge visits.")
    kb = make_kb(runtime, "Miles", {"miles.md": guide}, storeType="sqlite", minScore=0, chunkStrategy="markdown")
    question = "How many miles do I earn per euro on a Flex ticket?"
    assert "matchOffsets" not in client.post(f"/ragstore/rags/{kb}/query", json={"query": question}).json()["results"][0]
    r = client.post(f"/ragstore/rags/{kb}/query", json={"query": question, "marks": True}).json()  # (as Try it asks)
    best = r["results"][0]
    marked = [best["passage"][s:e] for s, e in best["matchOffsets"]]
    assert "Flex fares earn 8 miles per euro." in marked
    assert all(not m.startswith("#") and "Earning miles" not in m for m in marked) and len(marked) <= 2


def test_marks_and_keyword_ranking_take_a_text_without_a_word_to_index():
    """Found by schemathesis: a passage of stop words, digits or punctuation alone built an empty BM25 index (500)."""
    from eddi_rag.retrieval.marks import matching
    from eddi_rag.stores.embedded.bm25 import Bm25Index

    assert Bm25Index(["a", "b"], ["0.", "the and of"]).search("0 the", 2) == []
    assert matching("!!! ???", 0, 7, "0") == [] and matching("a", 0, 1, "a") == []
