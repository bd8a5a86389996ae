"""Small-to-big: the hit matches on a small chunk; the model gets the complete passage around it."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.common.quoting import unquoted
from eddi_rag.resource_types import resource_uri
from eddi_rag.retrieval.expansion import expand
from eddi_rag.state.sqlite import Database
from eddi_rag.stores.base import Chunk, SearchHit, StoreContext
from eddi_rag.stores.embedded.memory import InMemoryStore
from eddi_rag.workflow.memory import ConversationMemory
from tests.test_api import BASE, kb_id
from tests.test_workflow import RAG, TASK, make_agent, make_kb, step

GUIDE = """# Rail guide

Welcome to the guide.

## Night trains

Night trains leave Vienna at 22:10.

Sleeper cabins hold two berths.

Breakfast is served at 07:00 in the cabin.

## Dining car

The dining car serves goulash until 21:00.

Vegetarian dishes are always available.
"""


def chunk(doc: str, pos: int, text: str, section: str | None = None) -> Chunk:
    meta = {"document_id": doc, "position_in_doc": pos, "source": doc, **({"section": section} if section else {})}
    return Chunk(f"{doc}-{pos:03d}", text, meta, [1.0, float(pos), 0.0])


def as_hit(c: Chunk, sim: float) -> SearchHit:
    return SearchHit(c.id, c.text, c.metadata, sim)


@pytest.fixture
def store():
    s = InMemoryStore("kb", {}, StoreContext(Database(":memory:")))
    s.upsert([chunk("a", i, f"Sentence number {i} of document a.") for i in range(10)]
             + [chunk("g", 0, "# G\n\nIntro.", "# G"),
                chunk("g", 1, "# G > ## One\n\nFirst part of one.", "# G > ## One"),
                chunk("g", 2, "# G > ## One\n\nSecond part of one.", "# G > ## One"),
                chunk("g", 3, "# G > ## One > ### Deep\n\nDeep part.", "# G > ## One > ### Deep"),
                chunk("g", 4, "# G > ## Two\n\nOther section.", "# G > ## Two")])
    return s


def test_none_keeps_each_hit_as_it_is(store):
    hits = [as_hit(c, 0.9) for c in store.get(ids=["a-004", "a-006"])]
    assert [p.text for p in expand(store, hits, "none")] == ["Sentence number 4 of document a.",
                                                               "Sentence number 6 of document a."]


def test_neighbors_merge_one_documents_hits_in_document_order(store):
    hits = [as_hit(store.get(ids=["a-006"])[0], 0.9), as_hit(store.get(ids=["a-002"])[0], 0.8)]
    (p,) = expand(store, hits, "neighbors", neighbors=1)
    assert [c.metadata["position_in_doc"] for c in p.chunks] == [1, 2, 3, 5, 6, 7]
    assert p.text.split("\n\n")[3] == "[…]"  # positions 3 and 5 are not adjacent
    assert [h.id for h in p.hits] == ["a-006", "a-002"] and p.span == [1, 7]


def test_the_budget_bounds_the_expansion_never_the_hits(store):
    hits = [as_hit(store.get(ids=["a-005"])[0], 0.9)]
    (p,) = expand(store, hits, "neighbors", neighbors=3, max_chars=3 * 34)
    assert [c.metadata["position_in_doc"] for c in p.chunks] == [4, 5, 6]
    far = [as_hit(c, 0.9) for c in store.get(ids=["a-000", "a-009"])]
    (p,) = expand(store, far, "neighbors", neighbors=3, max_chars=100)
    assert [c.metadata["position_in_doc"] for c in p.chunks] == [0, 1, 9]


def test_a_context_budget_grows_the_best_passage_first_and_keeps_every_hit(store):
    hits = [as_hit(store.get(ids=["a-005"])[0], 0.9), as_hit(store.get(ids=["g-002"])[0], 0.8)]
    sentence, other = len(hits[0].text), len(hits[1].text)  # 32 and 33 characters
    first, second = expand(store, hits, "neighbors", neighbors=3, max_chars=10_000, total_chars=other + 3 * sentence + 10)
    assert [c.metadata["position_in_doc"] for c in first.chunks] == [4, 5, 6]  # the room left after g-002's own chunk
    assert [c.id for c in second.chunks] == ["g-002"]
    unbounded = expand(store, hits, "neighbors", neighbors=3, max_chars=10_000)
    assert len(unbounded[0].chunks) == 7 and len(unbounded[1].chunks) == 5


def test_section_takes_the_enclosing_section_and_shows_its_heading_once(store):
    (p,) = expand(store, [as_hit(store.get(ids=["g-002"])[0], 0.9)], "section")
    assert [c.id for c in p.chunks] == ["g-001", "g-002", "g-003"]  # ## One with its ### part; not ## Two, not the intro
    assert p.text == ("# G > ## One\n\nFirst part of one.\n\nSecond part of one.\n\n"
                      "# G > ## One > ### Deep\n\nDeep part.")
    (small,) = expand(store, [as_hit(store.get(ids=["g-003"])[0], 0.9)], "section", max_chars=70)
    assert [c.id for c in small.chunks] == ["g-002", "g-003"]  # the budget: the nearest of ## One only


def test_overlapping_recursive_chunks_are_joined_without_repeating(store):
    s = InMemoryStore("kb2", {}, StoreContext(Database(":memory:")))
    s.upsert([chunk("o", 0, "The first sentence is here. The shared overlap part"),
              chunk("o", 1, "The shared overlap part continues to the end.")])
    (p,) = expand(s, [as_hit(s.get(ids=["o-001"])[0], 0.9)], "neighbors", overlap=64)
    assert p.text == "The first sentence is here. The shared overlap part continues to the end."


def test_unknown_mode_names_the_field(store):
    with pytest.raises(ValueError, match="contextExpansion 'all'"):
        expand(store, [], "all")


@pytest.fixture
def api(tmp_path):
    from eddi_rag.runtime import Runtime

    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as c:
        c.kb = kb_id(c.post(BASE, json={"name": "guide", "embeddingProvider": "local", "storeType": "sqlite",
                                        "chunkStrategy": "paragraph", "chunkSize": 60, "chunkOverlap": 0,
                                        "minScore": 0, "maxResults": 2, "contextExpansion": "section"}))
        runtime.ingest_file(c.kb, "guide.md", GUIDE.encode())
        yield c
    runtime.close()


def test_rest_query_and_retrieve_carry_the_passage_beside_the_text(api):
    r = api.post(f"{BASE}/{api.kb}/query", json={"query": "How many berths does a sleeper cabin hold?"}).json()
    best = r["results"][0]
    assert best["text"] == "Sleeper cabins hold two berths." and r["contextExpansion"] == "section"
    assert "Night trains leave Vienna at 22:10." in best["passage"] and "Breakfast is served" in best["passage"]
    assert "goulash" not in best["passage"]
    assert r["passages"][0]["text"] == best["passage"] and best["id"] in r["passages"][0]["hits"]
    bare = api.post(f"{BASE}/{api.kb}/query", json={"query": "sleeper cabin berths", "contextExpansion": "none"}).json()
    assert bare["results"][0]["passage"] == bare["results"][0]["text"]
    ctx = api.post(f"{BASE}/{api.kb}/retrieve", json={"query": "sleeper cabin berths", "minRelevance": 0}).json()
    assert "Breakfast is served" in ctx["chunks"][0]["passage"]
    assert api.post(f"{BASE}/{api.kb}/query", json={"query": "x", "contextExpansion": "all"}).status_code == 422


def test_the_llm_task_gets_one_passage_per_document_and_traces_the_span(runtime):
    kb = make_kb(runtime, "Guide", {}, chunkStrategy="paragraph", chunkSize=60, chunkOverlap=0, minScore=0,
                 maxResults=3)
    runtime.ingest_file(kb, "guide.md", GUIDE.encode())
    agent = make_agent(runtime, [step(resource_uri("rags", kb, 1), RAG)])
    memory = ConversationMemory(agent, user_input="When do night trains leave Vienna and is there breakfast?")
    task = {**TASK, "knowledgeBases": [{"name": "Guide"}], "contextExpansion": "section"}
    turn = runtime.llm_task.execute(memory, task, None)
    context = memory.get("rag:context:answer")
    # the hits' sections and what surrounds them: the label names the heading path they share
    assert context.count("[Source ") == 1 and "[Source 1: guide.md, # Rail guide; match: §Night trains]" in context
    assert "Sleeper cabins hold two berths." in context  # not a hit itself: the section around the hits
    (entry,) = memory.get("rag:trace:answer")
    (passage,) = entry["passages"]
    assert passage["n"] == 1 and len(passage["hits"]) >= 2 and passage["span"][0] <= passage["span"][1]
    assert all(c["injected"] for c in entry["chunks"] if c["id"] in passage["hits"])
    assert unquoted(turn.system_message).endswith(context)
    memory = ConversationMemory(agent, user_input="When do night trains leave Vienna and is there breakfast?")
    runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Guide"}], "contextExpansion": "none"}, None)
    assert memory.get("rag:context:answer").count("[Source ") == 3  # the task's override: each hit alone
    memory = ConversationMemory(agent, user_input="When do night trains leave Vienna and is there breakfast?")
    runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Guide"}]}, None)  # the KB's default: neighbors
    context = memory.get("rag:context:answer")
    assert context.count("[Source ") == 1 and "goulash" in context  # the short guide fits whole around its hits


def test_expansion_leaves_room_for_another_kbs_bare_hits(runtime):
    guide = "# Night trains\n\n" + "\n\n".join(f"Night train fact {i}: sleeper cabins are quiet." for i in range(30))
    notes = "Night train notes: " + "the Vienna sleeper leaves at 22:10 and arrives at 07:40 in the morning. " * 3
    g = make_kb(runtime, "Guide", {}, chunkStrategy="paragraph", chunkSize=60, chunkOverlap=0, minScore=0, maxResults=1)
    runtime.ingest_file(g, "guide.md", guide.encode())
    n = make_kb(runtime, "Notes", {"notes.md": notes}, minScore=0, maxResults=2, contextExpansion="none")
    agent = make_agent(runtime, [step(resource_uri("rags", g, 1), RAG), step(resource_uri("rags", n, 1), RAG)])
    memory = ConversationMemory(agent, user_input="night train sleeper")
    task = {**TASK, "knowledgeBases": [{"name": "Guide"}, {"name": "Notes"}], "maxRagContextChars": 600}
    runtime.llm_task.execute(memory, task, None)
    context = memory.get("rag:context:answer")
    assert "omitted" not in context and "notes.md" in context and "22:10" in context  # the bare hit kept its room
    assert context.count("Night train fact") > 1  # and the guide still grew around its hit
