"""What a turn or a run will need is checked at save, with the JSON path in the 400 (issue 30, finding 7)."""

from __future__ import annotations

import pytest

from eddi_rag.config import ConfigValidationError

KB = {"name": "Docs", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0}


@pytest.mark.parametrize("entry", [{"id": "abc"}, {"uri": "eddi://ai.labs.rag/ragstore/rags/abc?version=1"}, "Docs", {"name": 5}])
def test_an_llm_task_naming_a_knowledge_base_without_its_name_is_refused_at_save(client, entry):
    body = {"tasks": [{"id": "answer", "parameters": {"systemMessage": "Hi"}}, {"id": "t2", "knowledgeBases": [entry]}]}
    r = client.post("/llmstore/llmconfigs", json=body)
    assert r.status_code == 400 and r.json()["errors"][0]["path"].startswith("$.tasks[1].knowledgeBases[0]"), r.text


def test_a_task_saved_before_the_rule_answers_400_naming_it_not_500(client):
    runtime = client.runtime
    kb = runtime.saving.create("rags", KB)
    llm = runtime.resources.create("llm", {"tasks": [{"id": "answer", "knowledgeBases": [{"id": kb.id}]}]})
    workflow = runtime.resources.create("workflows", {"workflowSteps": [{"type": "eddi://ai.labs.rag", "config": {"uri": kb.uri}},
                                                                       {"type": "eddi://ai.labs.llm", "config": {"uri": llm.uri}}]})
    agent = runtime.resources.create("agents", {"workflows": [workflow.uri]})
    with pytest.raises(ConfigValidationError, match=r"\$\.tasks\[id=answer\]\.knowledgeBases\[0\]\.name"):
        runtime.turn(agent.id, "hello")


def test_a_test_question_names_only_a_chunk_its_author_can_see(client):
    runtime = client.runtime
    kb = runtime.saving.create("rags", KB)
    runtime.ingest(kb.id, "a.md", "Trains to Vienna leave hourly.")
    runtime.ingest(kb.id, "private.md", "Alice's locker code is 4711.", user_id="alice")
    chunk = runtime.query(kb.id, "trains")[0].id
    private = runtime.query(kb.id, "locker code", user_id="alice")[0].id
    assert client.post(f"/ragstore/rags/{kb.id}/questions", json={"question": "trains?", "chunkId": chunk}).status_code == 201
    for wrong in ("no-such-chunk", private):
        r = client.post(f"/ragstore/rags/{kb.id}/questions", json={"question": "q", "chunkId": wrong})
        if wrong == private:  # an in-process caller sees every user's chunk: over a user's key it is refused
            key = runtime.keys.create("default", "editor", user="bob")[1]
            r = client.post(f"/ragstore/rags/{kb.id}/questions", json={"question": "q", "chunkId": wrong},
                            headers={"Authorization": f"Bearer {key}"})
        assert r.status_code == 404 and "$.chunkId" in r.json()["error"], r.text  # as a vote on such a chunk
