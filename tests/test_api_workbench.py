"""The endpoints the Manager UI is built on (each usable on its own): ingestion list and retry,
a KB's documents, the chunking preview, the injected context, citation feedback, the doctor,
an agent's turn."""

import base64
from pathlib import Path

from eddi_rag.tools.bundle import load_bundle
from tests.support.files import pdf
from tests.support.kbs import make_kb
from tests.test_api import BASE, wait_for

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def ingest(client, kb: str, name: str, body: bytes | str, content_type: str = "text/markdown") -> dict:
    r = client.post(f"{BASE}/{kb}/ingest?documentName={name}&replace=true", content=body, headers={"Content-Type": content_type})
    assert r.status_code == 202, r.text
    return wait_for(client, f"{BASE}/{kb}/ingestion/{r.json()['ingestionId']}/status")


def test_ingestions_are_listed_newest_first_and_a_failed_one_is_retried_with_its_document(client):
    kb = make_kb(client, "Rail", requiredMetadata=["owner"])  # a file upload carries no metadata: it fails
    failed = ingest(client, kb, "night.md", "# Night train\n\nThe night train leaves at 22:10.")
    assert failed["status"].startswith("failed: ") and "owner" in failed["status"]
    listed = client.get(f"{BASE}/{kb}/ingestions").json()
    assert [j["ingestionId"] for j in listed] == [failed["ingestionId"]] and listed[0]["createdOn"]

    cfg = client.get(f"{BASE}/{kb}").json()
    del cfg["requiredMetadata"]
    client.put(f"{BASE}/{kb}?version=1", json=cfg)
    # the job ran against version 1 of the config, which still requires metadata: retry keeps failing the same way
    again = client.post(f"{BASE}/{kb}/ingestion/{failed['ingestionId']}/retry")
    assert again.status_code == 202 and again.json()["status"] == "pending"
    assert wait_for(client, f"{BASE}/{kb}/ingestion/{failed['ingestionId']}/status")["status"] == failed["status"]

    done = ingest(client, kb, "day.md", "# Day train\n\nThe day train leaves at 08:00.")
    assert done["status"] == "completed"  # submitted at version 2
    assert client.post(f"{BASE}/{kb}/ingestion/{done['ingestionId']}/retry").status_code == 409
    assert client.post(f"{BASE}/{kb}/ingestion/nope/retry").status_code == 404
    assert [j["documentName"] for j in client.get(f"{BASE}/{kb}/ingestions").json()] == ["day.md", "night.md"]


def test_documents_are_listed_with_chunk_counts_and_deleted_one_at_a_time(client):
    kb = make_kb(client, "Rail", chunkStrategy="paragraph", chunkSize=60, chunkOverlap=0)
    ingest(client, kb, "a.md", "Apples grow on trees in the orchard.\n\nPears ripen late in the autumn season.")
    ingest(client, kb, "b.md", "Bananas are yellow.")
    docs = client.get(f"{BASE}/{kb}/documents").json()
    assert docs["complete"] is True
    assert [(d["documentId"], d["chunks"]) for d in docs["documents"]] == [("a.md", 2), ("b.md", 1)]

    assert client.delete(f"{BASE}/{kb}/documents/a.md").json()["removed"] == 2
    assert client.delete(f"{BASE}/{kb}/documents/a.md").status_code == 404
    assert [d["documentId"] for d in client.get(f"{BASE}/{kb}/documents").json()["documents"]] == ["b.md"]
    found = client.post(f"{BASE}/{kb}/query", json={"query": "apples orchard"}).json()["results"]
    assert {r["source"] for r in found} == {"b.md"}


def test_chunk_preview_shows_the_chunks_a_configuration_would_make_and_stores_nothing(client):
    config = {"name": "x", "embeddingProvider": "local", "chunkStrategy": "paragraph", "chunkSize": 60, "chunkOverlap": 0}
    r = client.post(f"{BASE}/chunkPreview", json={"configuration": config, "text": "One two three.\n\nFour five six."})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [c["text"] for c in body["chunks"]] == ["One two three.\n\nFour five six."]
    assert body["chunks"][0]["tokens"] > 0 and body["tokenLimit"] == 256 and body["tokenizer"] == "model"

    pages = base64.b64encode(pdf(["Page one about trains.", "Page two about boats."])).decode()
    body = client.post(f"{BASE}/chunkPreview", json={"configuration": config, "documentName": "t.pdf", "base64": pages}).json()
    assert [c["citation"].get("page") for c in body["chunks"]] == [1, 2] and body["format"] == "pdf"

    bad = client.post(f"{BASE}/chunkPreview", json={"configuration": {**config, "chunkSize": "big"}, "text": "x"})
    assert bad.status_code == 400 and bad.json()["errors"][0]["path"] == "$.chunkSize"
    both = client.post(f"{BASE}/chunkPreview", json={"configuration": config, "text": "x", "base64": "eA=="})
    assert both.status_code == 422 and "exactly one of text or base64" in both.text
    assert client.get(f"{BASE}/descriptors").json() == []


def test_context_is_the_section_an_llm_task_would_inject_and_feedback_is_kept_for_review(client):
    kb = make_kb(client, "Rail", minScore=0.5)
    ingest(client, kb, "night.md", "# Night train\n\nThe night train to Vienna leaves at 22:10 from platform 4.")
    r = client.post(f"{BASE}/{kb}/context", json={"query": "When does the night train leave?"}).json()
    assert r["section"].startswith("## Relevant Context:\n### Source: Rail\n\n[Source 1: night.md")
    assert "22:10" in r["section"] and r["sources"][0]["source"] == "night.md"
    assert r["trace"][0]["kb"] == "Rail" and r["trace"][0]["chunks"][0]["injected"] is True

    chunk = r["sources"][0]["chunkId"]
    for vote in ("down", "up"):
        posted = client.post(f"{BASE}/{kb}/feedback", json={"query": "When does the night train leave?", "chunkId": chunk,
                                                            "vote": vote, "source": "night.md"})
        assert posted.status_code == 201
    assert client.post(f"{BASE}/{kb}/feedback", json={"query": "q", "chunkId": chunk, "vote": "meh"}).status_code == 422
    down = client.get("/ragstore/feedback?vote=down").json()
    assert [(f["kbId"], f["question"], f["chunkId"], f["vote"]) for f in down] == [
        (kb, "When does the night train leave?", chunk, "down")]
    assert len(client.get(f"/ragstore/feedback?kbId={kb}").json()) == 2


def test_the_extractive_answer_is_named_so_when_serve_makes_it_at_its_first_use(client):
    """Issue 58 (the workflow author's findings): ``serve`` hands the app a chat model made at its first use
    (answers.choice.Deferred); Try it labelled its extractive answer "By Deferred, from the context below"."""
    from eddi_rag.answers.choice import later

    client.app.state.chat_model = later("extractive", None, None, offline=True)
    kb = make_kb(client, "Rail", minScore=0)
    ingest(client, kb, "night.md", "The night train to Vienna leaves at 22:10 from platform 4.")
    answer = client.post(f"{BASE}/{kb}/context", json={"query": "When does the night train leave?", "answer": True}).json()["answer"]
    assert answer["by"] == "extractive" and answer["model"] is None and "22:10" in answer["text"], answer


def test_doctor_reports_each_check_with_its_fix(client):
    kb = make_kb(client, "Rail", storeType="pgvector", storeParameters={"url": "${env:NO_SUCH_VARIABLE_HERE}"})
    checks = {c["check"]: c for c in client.get(f"{BASE}/{kb}/doctor").json()}
    assert list(checks) == ["configuration", "provider", "secrets", "embeddings", "store", "dimensions", "documents", "ingestions", "sources", "acl"]
    secrets = checks["secrets"]  # every check is shown: what needs the secret is skipped, not hidden
    assert secrets["level"] == "failed" and "NO_SUCH_VARIABLE_HERE" in secrets["detail"] and secrets["fix"]
    assert {checks[c]["level"] for c in ("embeddings", "store", "dimensions", "documents")} == {"skipped"}
    verdict = client.get(f"{BASE}/{kb}/verdict").json()
    assert (verdict["status"], verdict["check"]) == ("failed", "secrets") and verdict["fix"] == secrets["fix"]


def test_an_agent_turn_shows_the_system_message_and_the_memory_entries(client):
    runtime = client.app.state.runtime
    load_bundle(runtime.saving, EXAMPLES / "workflows")
    for kb_dir in sorted((EXAMPLES / "documents").iterdir()):
        for doc in sorted(kb_dir.glob("*.md")):
            runtime.ingest(kb_dir.name, doc.name, doc.read_text(encoding="utf-8"))
    r = client.post("/agentstore/agents/travel-assistant/turn", json={"message": "Can I get my money back on a Saver fare?"})
    assert r.status_code == 200, r.text
    turn = r.json()
    assert turn["knowledgeBases"] == ["Travel policies", "Loyalty program"] and turn["answer"] is None
    assert "## Relevant Context:" in turn["systemMessage"] and "refunds.md" in turn["systemMessage"]
    assert turn["memory"]["rag:context:" + turn["taskId"]] in turn["systemMessage"]
    assert [m["role"] for m in turn["messages"]] == ["system", "human"]
    missing = client.post("/agentstore/agents/travel-assistant/turn", json={"message": "hi", "taskId": "nope"})
    assert missing.status_code == 400 and "no LLM task 'nope'" in missing.json()["error"]
    assert client.post("/agentstore/agents/nobody/turn", json={"message": "hi"}).status_code == 404
