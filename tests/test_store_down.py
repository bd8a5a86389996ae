"""A knowledge base's store down (the TypeSense integration spec's case, issue 12): the server
starts, the KB's health says why, its queries answer 503, LLM turns go on without it (a trace
entry), uploads wait as ``pending: indexing unavailable`` and are indexed once the store is back.
The real PostgreSQL and Chroma servers the tests start are stopped and started again."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.ingest import jobs, worker
from eddi_rag.resource_types import resource_uri
from eddi_rag.runtime import Runtime
from eddi_rag.workflow.memory import ConversationMemory
from tests.support.marks import engines
from tests.support.services import chroma_server, postgres_server
from tests.support.waiting import until

BASE = "/ragstore/rags"


@pytest.fixture(params=engines("pgvector", "chroma", served=("pgvector", "chroma")))
def engine(request):
    """(storeType, storeParameters, server with stop()/start())."""
    if request.param == "pgvector":
        with postgres_server() as server:
            yield "pgvector", {"url": server.uri}, server
    else:
        with chroma_server() as server:
            yield "chroma", server.params, server


def test_a_store_down_at_start_and_back(engine, tmp_path, monkeypatch):
    store_type, params, server = engine
    monkeypatch.setattr(worker, "RETRY_SECONDS", (0.2, 1.0))
    setup = Runtime(tmp_path)
    remote = setup.resources.create("rags", {"name": "Remote", "embeddingProvider": "local", "storeType": store_type,
                                             "storeParameters": params}).id
    local = setup.resources.create("rags", {"name": "Local", "embeddingProvider": "local", "storeType": "sqlite"}).id
    setup.ingest(remote, "trains.md", "The night train to Vienna leaves at 22:10.")
    setup.ingest(local, "hotels.md", "The hotel near the station has rooms with a view of the trains.")
    setup.close()
    server.stop()

    runtime = Runtime(tmp_path)  # the server starts with the store down
    with TestClient(create_app(runtime)) as client:
        health = client.get(f"{BASE}/{remote}/health").json()
        assert health["status"] == "error" and store_type in health["error"]
        assert client.get(f"{BASE}/{local}/health").json()["status"] == "ok"

        down = client.post(f"{BASE}/{remote}/query", json={"query": "night train"})
        assert down.status_code == 503 and "unavailable" in down.json()["error"] and remote in down.json()["error"]
        assert client.post(f"{BASE}/{remote}/retrieve", json={"query": "night train"}).status_code == 503

        steps = [{"type": "eddi://ai.labs.rag", "config": {"uri": resource_uri("rags", kb, 1)}} for kb in (remote, local)]
        workflow = runtime.resources.create("workflows", {"workflowSteps": steps})
        agent = runtime.resources.create("agents", {"workflows": [workflow.uri]}).id
        memory = ConversationMemory(agent, user_input="trains and hotels")
        turn = runtime.llm_task.execute(memory, {"id": "t", "enableWorkflowRag": True, "ragDefaults": {"minScore": 0}}, None)
        assert "hotel near the station" in turn.system_message  # the turn goes on with the KB that answers
        trace = memory.get("rag:trace:t")
        (failed,) = [e for e in trace if e["kb"] == "Remote"]  # the search verb's own answer, as REST's
        assert "unavailable" in failed["error"] and down.json()["error"] in failed["error"]

        job = client.post(f"{BASE}/{remote}/ingest?documentName=buses.md", content=b"The night bus leaves at 23:40.")
        assert job.status_code == 202
        job_id = job.json()["ingestionId"]
        status = f"{BASE}/{remote}/ingestion/{job_id}/status"
        assert until(lambda: client.get(status).json()["status"] == jobs.UNAVAILABLE)

        server.start()
        assert until(lambda: client.get(status).json()["status"] == "completed")
        assert client.get(f"{BASE}/{remote}/health").json()["status"] == "ok"
        found = client.post(f"{BASE}/{remote}/query", json={"query": "night bus", "minScore": 0}).json()["results"]
        assert {r["metadata"]["source"] for r in found} >= {"buses.md", "trains.md"}  # nothing was lost
    runtime.close()
