"""Every route, asked by those who may not read a document (issue 56's "Done when"): each route of the OpenAPI document
and each Manager route, read from the app itself (a route added tomorrow is walked without anyone listing it), is asked
as a viewer of another tenant, a viewer with no user and a reader of one group (sales); none of their answers holds
anything of a document only group finance may read (its name, id, chunk ids, text, a vote on it, its ingestion or a
question asked of it) nor anything of the other tenant, and none is a bare 500. No one (an editor and an administrator
asked too, with every read) gets back a secret typed into a configuration, of any resource type (issue 67, point 5: a
provider's ``apiKey``, an LLM task's ``parameters.apiKey``, an httpCall's header and the password in its URL)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime
from eddi_rag.ui.router import router as manager
from tests.support.kbs import make_kb
from tests.support.waiting import until

pytestmark = pytest.mark.integration  # (a folder source and every route: about a thousand requests)

SECRET_TEXT = "The salary bands for 2027 rise by 3.7 percent"
SECRET_DOC, SOURCED_DOC, OPEN_DOC = "salaries-2027.md", "payroll-q3.md", "handbook.md"
VOTED = "how do the salary bands move?"
ACME_KB_NAME, ACME_DOC, ACME_TEXT = "acme roadmap", "acme-roadmap.md", "Acme ships the Falcon router in May"
TYPED_KEY, TYPED_PASSWORD = "sk-walk-typed-0123456789abcdef", "walk-typed-imap-password-42"
# (issue 67, point 5) typed into the other resource types, by path prefix: each read of that type is asked for it
TYPED_ELSEWHERE = {
    "/providerstore/providers": ("sk-walk-provider-0123456789", {"type": "openai", "apiKey": "sk-walk-provider-0123456789"}),
    "/llmstore/llms": ("sk-walk-llm-task-0123456789", {"tasks": [{"id": "typed", "type": "openai", "parameters": {
        "apiKey": "sk-walk-llm-task-0123456789", "modelName": "gpt-4o-mini"}}]}),
    "/apicallstore/apicalls": ("walk-header-key-0123456789", {"targetServerUrl": "https://walker:walk-url-password-77@api.example.com",
                                                              "httpCalls": [{"name": "typed", "request": {"method": "GET", "path": "/x",
                                                              "headers": {"X-Api-Key": "walk-header-key-0123456789"}}}]}),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory, monkeypatch_module):
    """Tenant default: a DOCUMENT_ACL knowledge base with a finance document uploaded (its ingestion kept), one brought
    by a folder source (default ACL group:finance), a public one, a vote and a test question on the finance one, a
    workflow and agent naming it. Tenant acme: a knowledge base of its own with a document and a vote."""
    root = tmp_path_factory.mktemp("walk")
    folder = root / "payroll"
    folder.mkdir()
    (folder / SOURCED_DOC).write_text(f"# Payroll\n\n{SECRET_TEXT} for the payroll run of Q3.\n")
    monkeypatch_module.setenv("EDDI_RAG_FOLDER_ROOTS", str(root))
    monkeypatch_module.setenv("EDDI_VAULT_MASTER_KEY", "the-route-walk-vault-master-key")
    runtime = Runtime(root / "data")
    keys = {"editor": runtime.keys.create("default", "editor", user="erin")[1],
            "admin": runtime.keys.create("default", "admin")[1],
            "sales reader": runtime.keys.create("default", "viewer", user="bob", groups=["sales"])[1],
            "viewer with no user": runtime.keys.create("default", "viewer")[1],
            "other tenant's viewer": runtime.keys.create("acme", "viewer", user="bob", groups=["finance"])[1],
            "acme editor": runtime.keys.create("acme", "editor", user="amy")[1]}
    runtime.groups.set("default", "alice", ["finance"])
    runtime.groups.set("default", "bob", ["sales"])
    headers = {who: {"Authorization": f"Bearer {key}"} for who, key in keys.items()}
    client = TestClient(create_app(runtime))
    client.__enter__()
    kb = make_kb(runtime, "people", audience="DOCUMENT_ACL", minScore=0,
                 sources=[{"name": "Payroll", "folder": {"path": str(folder)}, "settings": {"acl": ["group:finance"]}}])
    jobs = {}
    for name, text, acl in ((SECRET_DOC, f"{SECRET_TEXT}, approved by the board.", "group:finance"),
                            (OPEN_DOC, "The staff handbook: the office opens at eight.", "public")):
        r = client.post(f"/ragstore/rags/{kb}/ingest", params={"documentName": name, "replace": "true", "acl": acl},
                        content=text.encode(), headers={**headers["editor"], "Content-Type": "text/plain"})
        assert r.status_code == 202, r.text
        jobs[name] = r.json()["ingestionId"]
    for job in jobs.values():
        until(lambda j=job: client.get(f"/ragstore/rags/{kb}/ingestion/{j}/status", headers=headers["editor"]).json()
              ["status"] == "completed", "the ingestions")
    assert runtime.sources.run(kb, "payroll").added == 1
    store = runtime.stores.get(kb, runtime.knowledge_bases.get(kb))
    hidden = [c.id for c in store.get({"document_id": {"$in": [SECRET_DOC, SOURCED_DOC]}})]
    vote = runtime.feedback.record("default", kb, VOTED, hidden[0], "down", SECRET_DOC, SECRET_DOC, None, "alice")
    question = client.post(f"/ragstore/rags/{kb}/questions", json={"question": VOTED, "asUser": "alice"},
                           headers=headers["editor"])
    assert question.status_code == 201 and SECRET_DOC in question.text
    llm = runtime.resources.create("llm", {"tasks": [{"id": "answer", "type": "openai", "enableWorkflowRag": True}]}).uri
    workflow = runtime.resources.create("workflows", {"workflowSteps": [
        {"type": "eddi://ai.labs.rag", "config": {"uri": f"eddi://ai.labs.rag/ragstore/rags/{kb}?version=1"}},
        {"type": "eddi://ai.labs.llm", "config": {"uri": llm}}]})
    agent = runtime.resources.create("agents", {"workflows": [workflow.uri]}).id
    made = client.post("/ragstore/rags", json={"name": ACME_KB_NAME, "embeddingProvider": "local", "storeType": "sqlite",
                                               "minScore": 0}, headers=headers["acme editor"])
    assert made.status_code == 201, made.text
    acme_kb = made.headers["Location"].split("/")[-1].split("?")[0]
    runtime.ingest(acme_kb, ACME_DOC, f"{ACME_TEXT}, says the roadmap.")
    acme_chunk = runtime.stores.get(acme_kb, runtime.knowledge_bases.get(acme_kb)).get(None)[0].id
    runtime.feedback.record("acme", acme_kb, "when does the Falcon ship?", acme_chunk, "up", ACME_DOC, ACME_DOC, None, "amy")
    typed = client.post("/ragstore/rags", headers=headers["editor"], json={  # secrets typed in: kept in the vault
        "name": "typed keys", "embeddingProvider": "openai", "storeType": "sqlite",
        "embeddingParameters": {"apiKey": TYPED_KEY, "model": "text-embedding-3-small"},
        "sources": [{"name": "Mail", "imap": {"host": "mail.example.com", "username": "kb", "password": TYPED_PASSWORD}}]})
    assert typed.status_code == 201, typed.text
    elsewhere = {}
    for prefix, (_, body) in TYPED_ELSEWHERE.items():
        made = client.post(prefix, json=body, headers=headers["editor"])
        assert made.status_code == 201, made.text
        elsewhere[prefix] = made.headers["Location"].split("/")[-1].split("?")[0]
    kept = b"".join(p.read_bytes() for p in (root / "data").iterdir() if p.is_file())  # (the database, its WAL)
    assert not [s for s in [TYPED_KEY, TYPED_PASSWORD, *TYPED_SECRETS] if s.encode() in kept]
    values = {"id": kb, "ingestion_id": jobs[SECRET_DOC], "document_id": SECRET_DOC, "documentId": SECRET_DOC,
              "chunk_id": hidden[0], "feedback_id": vote.id, "question_id": question.json()["id"], "sourceId": "payroll",
              "tenantId": "default", "agentId": agent, "kbId": kb, "user": "alice", "d": SECRET_DOC}
    secrets = {"finance": [SECRET_DOC, SOURCED_DOC, SECRET_TEXT, "3.7 percent", VOTED, jobs[SECRET_DOC], *hidden],
               "acme": [acme_kb, ACME_KB_NAME, ACME_DOC, ACME_TEXT, "Falcon", acme_chunk]}
    yield {"client": client, "headers": headers, "values": values, "secrets": secrets, "kb": kb, "acme_kb": acme_kb,
           "agent": agent, "typed_kb": typed.headers["Location"].split("/")[-1].split("?")[0], "elsewhere": elsewhere}
    client.__exit__(None, None, None)
    runtime.close()


@pytest.fixture(scope="module")
def monkeypatch_module():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def _routes(app: Any) -> list[tuple[str, str, list[dict[str, Any]], bool]]:
    """(method, path, parameters, takes a body) of every operation of the OpenAPI document, then every Manager route
    and /metrics (kept out of the document), read from the app."""
    found = [(method.upper(), path, op.get("parameters", []), "requestBody" in op)
             for path, ops in app.openapi()["paths"].items() for method, op in ops.items()]
    for route in manager.routes:
        params = [{"name": n, "in": "path", "required": True} for n in re.findall(r"{(\w+)", route.path)]
        if route.path == "/ui/kbs/{id}/document":
            params.append({"name": "d", "in": "query", "required": True})
        found += [(method, route.path, params, method == "POST") for method in sorted(route.methods)]
    return [*found, ("GET", "/metrics", [], False)]


BODY = {"query": "salary bands 2027 percent", "question": "salary bands 2027 percent", "message": "What do salary bands do?",
        "minRelevance": 0, "userId": "alice", "answer": True, "vote": "down", "acl": ["public"], "enabled": True,
        "documents": [{"document_id": "walk.md", "text": "walked"}], "reviewed": True, "grants": [], "groups": ["finance"]}
TYPED_SECRETS = [secret for secret, _ in TYPED_ELSEWHERE.values()] + ["walk-url-password-77"]
VALUE = {"page": "1", "version": "1", "limit": "10", "q": "salary bands", "filter": "", "reviewed": "all", "vote": "all"}
WHO = ("other tenant's viewer", "viewer with no user", "sales reader", "editor", "admin")  # (the last two: secrets only)


def _ask(client: TestClient, method: str, path: str, params: list[dict[str, Any]], body: bool, values: dict[str, str],
         headers: dict[str, str]):
    url = path
    query = {}
    for p in params:
        value = values.get(p["name"], VALUE.get(p["name"], "x"))
        if p["in"] == "path":
            url = url.replace(f"{{{p['name']}}}", value).replace(f"{{{p['name']}:path}}", value)
        elif p["in"] == "query" and (p.get("required") or p["name"] in values):
            query[p["name"]] = value
    return client.request(method, url, params=query, json=BODY if body else None, headers=headers, follow_redirects=False)


def test_every_route_as_those_who_may_not_read_shows_nothing_of_it(world):
    client, values, secrets = world["client"], world["values"], world["secrets"]
    routes = _routes(client.app)
    walked_paths = {path for _, path, _, _ in routes}
    assert len(routes) > 130 and {"/ragstore/rags/{id}/ingestions", "/ui/feedback", "/metrics"} <= walked_paths
    reads = [r for r in routes if r[0] == "GET"]
    writes = [r for r in routes if r[0] != "GET" and r[1] not in ("/ui/login", "/ui/logout")]
    read_only = {"editor", "admin"}  # (they may write: asked with reads alone, and for no knowledge base of another tenant)
    leaks, errors, walked = [], [], 0
    for who in WHO:
        forbidden = [TYPED_KEY, TYPED_PASSWORD, *TYPED_SECRETS]  # no face returns a secret typed into a configuration
        if who not in ("editor", "admin"):
            forbidden += secrets["finance"] + (secrets["acme"] if who != "other tenant's viewer" else [])
        if who == "other tenant's viewer":
            forbidden += [world["kb"], world["agent"], "people", OPEN_DOC]  # nothing of tenant default at all
        for own in (values, {**values, "id": world["acme_kb"], "kbId": world["acme_kb"]},
                    {**values, "id": world["typed_kb"], "kbId": world["typed_kb"]}):
            for method, path, params, body in reads + ([] if who in read_only else writes):
                r = _ask(client, method, path, params, body, own, world["headers"][who])
                walked += 1
                if r.status_code >= 500 and not (r.headers.get("content-type", "").startswith(("application/json", "text/html"))
                                                 and r.text.strip()):
                    errors.append(f"{who}: {method} {path}: a bare {r.status_code}")
                text = r.text + " ".join(f"{k}: {v}" for k, v in r.headers.items())
                asked = str(r.request.url)
                found = [s for s in forbidden if s and s in text and quote(s, safe="") not in asked and s not in asked]
                if found:
                    leaks.append(f"{who}: {method} {path} ({r.status_code}) shows {found}")
        for prefix, id in world["elsewhere"].items():  # each other resource type's reads, of the one typed into
            for method, path, params, body in reads:
                if path.startswith(prefix):
                    r = _ask(client, method, path, params, body, {**values, "id": id}, world["headers"][who])
                    walked += 1
                    if [s for s in TYPED_SECRETS if s in r.text] or r.status_code >= 500:
                        leaks.append(f"{who}: {method} {path} ({r.status_code}) shows a typed secret or failed")
    assert walked > 1500
    assert errors + leaks == [], "\n".join(errors + leaks)
