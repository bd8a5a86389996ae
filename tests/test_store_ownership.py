"""Who owns each physical store (issue 30, findings 1, 3, 4 and 5), on the real PostgreSQL+pgvector, Chroma and
Qdrant (local mode) the tests start: a tenant reads, writes, deletes and drops only stores it holds; adopting an
existing EDDI table is an admin's explicit act and never drops it; a copy gets a store of its own; EDDI's "name"
layout is tagged as EDDI tags it."""

from __future__ import annotations

import psycopg
import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.runtime import Runtime
from eddi_rag.stores.ownership import StoreNotAvailableError
from tests.test_eddi_stores import langchain4j_reads, langchain4j_table

BASE = "/ragstore/rags"
SECRET = "The A-tenant launch code is 4711."


def table_exists(url: str, table: str) -> bool:
    with psycopg.connect(url) as c:
        return c.execute("SELECT to_regclass(%s) IS NOT NULL", (table,)).fetchone()[0]


def kb_id(response) -> str:
    assert response.status_code == 201, response.text
    return response.headers["Location"].split("/")[-1].split("?")[0]


@pytest.fixture
def tenants(tmp_path, pgvector_params):
    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as client:
        keys = {name: {"Authorization": f"Bearer {runtime.keys.create(tenant, role)[1]}"}
                for name, tenant, role in (("a", "A", "admin"), ("a_editor", "A", "editor"), ("b", "B", "admin"))}
        client.runtime, client.keys, client.pg = runtime, keys, pgvector_params

        def kb(who: str, name: str, **fields):
            return client.post(BASE, headers=keys[who], params=fields.pop("query", None),
                               json={"name": name, "embeddingProvider": "local", "storeType": "pgvector", "minScore": 0,
                                     "contextExpansion": "none", **fields,
                                     "storeParameters": {**pgvector_params, **fields.pop("storeParameters", {})}})
        client.kb = kb
        yield client
    runtime.close()


def ingest(client, who: str, kb: str, doc: str, text: str):
    return client.post(f"{BASE}/{kb}/documents", headers=client.keys[who], json={"documents": [{"document_id": doc, "text": text}]})


@pytest.mark.integration
@pytest.mark.services
def test_no_read_write_delete_or_drop_across_tenants_on_pgvector(tenants, postgres_url):
    client, url = tenants, tenants.pg["url"]
    a = kb_id(client.kb("a", "Launch", storeNamespace="name"))
    assert ingest(client, "a", a, "codes.md", SECRET).json()["embedding_count"] == 1
    assert table_exists(url, "eddi_kb_launch")
    kb_id(client.kb("a", "Reserved", storeParameters={"tableName": "a_reserved"}))  # claimed, not yet made
    assert not table_exists(url, "a_reserved")
    plain = kb_id(client.kb("a", "Plain"))  # its table named after its id

    # tenant B naming A's stores, by A's KB name, A's table, A's default table and one A holds that does not exist yet
    refusals = [client.kb("b", "Launch", storeNamespace="name"),
                client.kb("b", "x", storeParameters={"tableName": "a_reserved"})]
    for r in refusals:
        assert r.status_code == 400 and "is not available to this tenant" in r.text, r.text
    # a named location in EDDI's reserved prefix is refused whoever holds it (EDDI's KnowledgeBaseStorageGuard)
    for r in (client.kb("b", "x", storeParameters={"tableName": "eddi_kb_launch"}),
              client.kb("b", "x", storeParameters={"tableName": f"eddi_kb_{plain}"}),
              client.kb("b", "x", storeNamespace="id", storeParameters={"table": "eddi_kb_launch"})):
        assert r.status_code == 400 and "may not start with 'eddi_kb'" in r.text, r.text
    # the answer is the same whether the table exists or not: nothing is revealed
    made = kb_id(client.kb("a", "Made", storeParameters={"tableName": "a_made"}))
    ingest(client, "a", made, "made.md", "A page.")
    assert table_exists(url, "a_made")
    exists = client.kb("b", "x", storeParameters={"tableName": "a_made"})
    assert exists.json()["error"].replace("a_made", "T") == refusals[1].json()["error"].replace("a_reserved", "T")

    # a configuration that reached the state without the save rules (saved before them): refused at every use
    stored = client.runtime.resources.create("rags", {"name": "Launch", "embeddingProvider": "local", "storeType": "pgvector",
                                                      "storeNamespace": "name", "storeParameters": tenants.pg, "minScore": 0},
                                             tenant="B").id
    for response in (client.post(f"{BASE}/{stored}/query", headers=client.keys["b"], json={"query": "launch code"}),
                     ingest(client, "b", stored, "evil.md", "The launch code is 0000."),
                     client.delete(f"{BASE}/{stored}/documents/codes.md", headers=client.keys["b"])):
        assert response.status_code == 400 or response.json().get("documents_failed") == 1, response.text
        assert "4711" not in response.text
    assert client.delete(f"{BASE}/{stored}", headers=client.keys["b"], params={"permanent": "true"}).status_code == 200
    assert table_exists(url, "eddi_kb_launch")
    found = client.post(f"{BASE}/{a}/query", headers=client.keys["a"], json={"query": "launch code"}).json()["results"]
    assert [h["text"] for h in found] == [SECRET]  # nothing injected, nothing deleted

    # one tenant's second KB shares a store only in EDDI's "id" layout
    r = client.kb("a", "Other", storeParameters={"tableName": "a_reserved"})
    assert r.status_code == 400 and "only in EDDI's \"id\" layout" in r.json()["error"]

    # a permanent delete drops a table this product created and nobody else uses
    assert client.delete(f"{BASE}/{a}", headers=client.keys["a"], params={"permanent": "true"}).status_code == 200
    assert not table_exists(url, "eddi_kb_launch")
    assert client.runtime.stores.ownership.of_kb(a) == []


@pytest.mark.integration
@pytest.mark.services
def test_an_existing_eddi_table_is_adopted_by_an_admin_and_never_dropped(tenants, postgres_url, local_model):
    from tests.test_eddi_stores import eddi_writes

    client, url = tenants, tenants.pg["url"]
    langchain4j_table(url, "eddi_kb_handbook", 384)
    eddi_writes(url, "eddi_kb_handbook", local_model, "Handbook")
    r = client.kb("a_editor", "Handbook", storeNamespace="name")
    assert r.status_code == 400 and "exists already and no knowledge base holds it" in r.text and "adopt=true" in r.text
    assert client.kb("a_editor", "Handbook", storeNamespace="name", query={"adopt": "true"}).status_code == 403
    kb = kb_id(client.kb("a", "Handbook", storeNamespace="name", query={"adopt": "true"}))
    (claim,) = client.runtime.stores.ownership.of_kb(kb)
    assert (claim["tenant"], claim["how"], claim["place"]) == ("A", "adopted", "eddi_kb_handbook")
    assert client.post(f"{BASE}/{kb}/query", headers=client.keys["a"], json={"query": "refunds"}).json()["results"]
    ingest(client, "a", kb, "ours.md", "Our own page about lounges.")
    tags = {r[2]["source"]: r[2]["kbId"] for r in langchain4j_reads(url, "eddi_kb_handbook")}
    assert tags == {"refunds.txt": "Handbook", "pets.txt": "Handbook", "ours.md": "Handbook"}  # EDDI's tag: the name
    # another tenant cannot take it, even as an admin adopting
    r = client.kb("b", "Handbook", storeNamespace="name", query={"adopt": "true"})
    assert r.status_code == 400 and "not available to this tenant" in r.text
    # a copy gets a store of its own (EDDI stamps "id"): deleting it leaves the original whole
    copy = client.post(f"{BASE}/{kb}", headers=client.keys["a"])
    copy_id = kb_id(copy)
    assert client.get(f"{BASE}/{copy_id}", headers=client.keys["a"]).json()["storeNamespace"] == "id"
    assert client.delete(f"{BASE}/{copy_id}", headers=client.keys["a"], params={"permanent": "true"}).status_code == 200
    assert client.delete(f"{BASE}/{kb}", headers=client.keys["a"], params={"permanent": "true"}).status_code == 200
    assert table_exists(url, "eddi_kb_handbook") and len(langchain4j_reads(url, "eddi_kb_handbook")) == 3  # adopted: kept


@pytest.mark.integration
@pytest.mark.services
def test_a_store_shared_in_the_id_layout_keeps_its_table_until_the_last_kb_goes(tenants):
    client, url = tenants, tenants.pg["url"]
    one = kb_id(client.kb("a", "One", storeNamespace="id", storeParameters={"table": "a_shared"}))
    two = kb_id(client.kb("a", "Two", storeNamespace="id", storeParameters={"table": "a_shared"}))
    ingest(client, "a", one, "one.md", "Trains to Vienna leave hourly.")
    ingest(client, "a", two, "two.md", "Trains to Munich leave every two hours.")
    assert client.delete(f"{BASE}/{one}", headers=client.keys["a"], params={"permanent": "true"}).status_code == 200
    assert [r[2]["source"] for r in langchain4j_reads(url, "a_shared")] == ["two.md"]  # one's chunks gone, two's kept
    found = client.post(f"{BASE}/{two}/query", headers=client.keys["a"], json={"query": "trains"}).json()["results"]
    assert [h["text"] for h in found] == ["Trains to Munich leave every two hours."]
    assert client.delete(f"{BASE}/{two}", headers=client.keys["a"], params={"permanent": "true"}).status_code == 200
    assert not table_exists(url, "a_shared")  # created here, no KB left: dropped


@pytest.mark.parametrize("engine", [pytest.param("chroma", marks=[pytest.mark.integration, pytest.mark.services]), "qdrant"])
def test_no_read_write_or_drop_across_tenants_on_chroma_and_qdrant(tmp_path, engine, request):
    params = request.getfixturevalue("chroma_params") if engine == "chroma" else {"path": "qdrant"}
    with Runtime(tmp_path) as runtime:
        def config(name: str, **store) -> dict:
            return {"name": name, "embeddingProvider": "local", "storeType": engine, "minScore": 0, "searchMode": "vector",
                    "contextExpansion": "none", "storeParameters": {**params, **store}}

        a = runtime.saving.create("rags", config("A docs", collectionName="a_docs"), tenant="A").id
        runtime.ingest(a, "codes.md", SECRET)
        with pytest.raises(StoreNotAvailableError, match="not available to this tenant"):
            runtime.saving.create("rags", config("B docs", collectionName="a_docs"), tenant="B")
        stored = runtime.resources.create("rags", config("B docs", collectionName="a_docs"), tenant="B").id
        with pytest.raises(StoreNotAvailableError):
            runtime.query(stored, "launch code")
        with pytest.raises(StoreNotAvailableError):
            runtime.ingest(stored, "evil.md", "The launch code is 0000.")
        runtime.saving.delete("rags", stored, permanent=True)  # B's configuration goes; A's collection stays whole
        assert [h.text for h in runtime.query(a, "launch code")] == [SECRET]
        # B's own KB in the same server or folder works beside it
        b = runtime.saving.create("rags", config("B docs"), tenant="B").id
        runtime.ingest(b, "b.md", "B's page.")
        assert [h.text for h in runtime.query(b, "launch code")] == ["B's page."]
        runtime.saving.delete("rags", a, permanent=True)  # created here, held by A alone: dropped
        assert runtime.stores.ownership.of_tenant("A") == []


@pytest.mark.integration
@pytest.mark.services
def test_eddis_own_table_parameter_without_a_namespace_reads_and_writes_that_table_in_place(tenants, postgres_url, local_model):
    """EDDI names a pgvector table through its own ``table`` parameter, no storeNamespace (EDDI reads that as its name
    layout): the table is found in langchain4j's layout and used in place (before: ``column "id" does not exist``),
    adopted only by an admin, its chunks tagged as EDDI tags them, never dropped."""
    from tests.test_eddi_stores import eddi_writes

    client, url = tenants, tenants.pg["url"]
    langchain4j_table(url, "eddi_support_vectors", 384)
    eddi_writes(url, "eddi_support_vectors", local_model, "Support")
    r = client.kb("a_editor", "Support", storeParameters={"table": "eddi_support_vectors"})
    assert r.status_code == 400 and "adopt=true" in r.text
    kb = kb_id(client.kb("a", "Support", storeParameters={"table": "eddi_support_vectors"}, query={"adopt": "true"}))
    results = client.post(f"{BASE}/{kb}/query", headers=client.keys["a"], json={"query": "How long do refunds take?"}).json()["results"]
    assert results and results[0]["metadata"]["source"] == "refunds.txt"  # EDDI's vectors, not ingested again
    ingest(client, "a", kb, "ours.md", "Our own page about lounges.")
    tags = {r[2]["source"]: r[2]["kbId"] for r in langchain4j_reads(url, "eddi_support_vectors")}
    assert tags == {"refunds.txt": "Support", "pets.txt": "Support", "ours.md": "Support"}  # readable by EDDI, tagged as it tags
    assert client.delete(f"{BASE}/{kb}", headers=client.keys["a"], params={"permanent": "true"}).status_code == 200
    assert table_exists(url, "eddi_support_vectors") and len(langchain4j_reads(url, "eddi_support_vectors")) == 3  # adopted: kept


@pytest.mark.integration
@pytest.mark.services
def test_adoption_is_never_skipped_when_the_store_cannot_be_reached_at_save(tmp_path, pgvector_params, monkeypatch, local_model):
    """Issue 42, point 2: an editor saved a KB naming an existing, unowned EDDI table while its connection could not
    be made (a key not stored yet, a wrong password, PostgreSQL stopped), then gave it working credentials: no
    adoption check ran and the KB read EDDI's rows. Now the save is kept and says so, and the first use, or the
    update that makes it reachable, asks before anything is read or written."""
    from tests.test_eddi_stores import eddi_writes

    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "a master passphrase for the tests")
    url = pgvector_params["url"]
    langchain4j_table(url, "support_vectors", 384)
    eddi_writes(url, "support_vectors", local_model, "Support")
    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as client:
        admin = {"Authorization": f"Bearer {runtime.keys.create('A', 'admin')[1]}"}
        editor = {"Authorization": f"Bearer {runtime.keys.create('A', 'editor')[1]}"}
        body = {"name": "Support", "embeddingProvider": "local", "storeType": "pgvector", "minScore": 0,
                "contextExpansion": "none", "storeParameters": {"table": "support_vectors", "url": "${vault:pg-url}"}}
        saved = client.post(BASE, headers=editor, json=body)
        kb = kb_id(saved)
        assert saved.json()["warnings"]  # (the key is not stored yet: it says so)
        assert [c["how"] for c in runtime.stores.ownership.of_kb(kb)] == ["unverified"]
        assert client.put("/secretstore/secrets/A/pg-url", headers=editor, json={"value": url}).status_code in (200, 201)
        # the first use asks: the table exists and is nobody's, so nothing is read
        r = client.post(f"{BASE}/{kb}/query", headers=editor, json={"query": "How long do refunds take?"})
        assert r.status_code == 400 and "adopt=true" in r.text and "refund" not in r.text.lower(), r.text
        r = client.post(f"{BASE}/{kb}/documents", headers=editor, json={"documents": [{"document_id": "e.md", "text": "x"}]})
        assert r.status_code == 400 or r.json().get("documents_failed") == 1, r.text
        # an update with the working URL written out is checked too
        fixed = {**body, "storeParameters": {"table": "support_vectors", "url": url}}
        r = client.put(f"{BASE}/{kb}", headers=editor, params={"version": 1}, json=fixed)
        assert r.status_code == 400 and "adopt=true" in r.text
        assert len(langchain4j_reads(url, "support_vectors")) == 2  # nothing written
        # an admin's adoption is what lets it in
        r = client.put(f"{BASE}/{kb}", headers=admin, params={"version": 1, "adopt": "true"}, json=fixed)
        assert r.status_code == 200, r.text
        assert [c["how"] for c in runtime.stores.ownership.of_kb(kb)] == ["adopted"]
        found = client.post(f"{BASE}/{kb}/query", headers=editor, json={"query": "How long do refunds take?"}).json()["results"]
        assert found and found[0]["metadata"]["source"] == "refunds.txt"

        # a named table that does not exist yet, saved unverified, is made at its first use and then its own
        other = kb_id(client.post(BASE, headers=editor, json={**body, "name": "New", "storeParameters": {
            "table": "support_new", "url": "${vault:pg-url-2}"}}))
        client.put("/secretstore/secrets/A/pg-url-2", headers=editor, json={"value": url})
        assert client.post(f"{BASE}/{other}/documents", headers=editor,
                           json={"documents": [{"document_id": "n.md", "text": "New page."}]}).status_code == 200
        assert [c["how"] for c in runtime.stores.ownership.of_kb(other)] == ["created"]
    runtime.close()


@pytest.mark.integration
@pytest.mark.services
def test_an_adopted_eddi_table_keeps_its_schema_and_is_left_as_found(tenants, local_model):
    """Issue 42, point 8: adopting an EDDI table added a ``tsv`` column and a GIN index, left after the KB was deleted
    (and every EDDI insert paid for them). Now nothing is added; keyword search reads the text as it goes; and what an
    earlier version added is taken away when the last KB lets the table go."""
    from tests.test_eddi_stores import eddi_writes

    client, url = tenants, tenants.pg["url"]

    def columns() -> set[str]:
        with psycopg.connect(url) as c:
            return {r[0] for r in c.execute("SELECT column_name FROM information_schema.columns WHERE table_name = 'eddi_vectors'")}

    def indexes() -> set[str]:
        with psycopg.connect(url) as c:
            return {r[0] for r in c.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'eddi_vectors'")}

    langchain4j_table(url, "eddi_vectors", 384)
    eddi_writes(url, "eddi_vectors", local_model, "Handbook")
    before = (columns(), indexes())
    kb = kb_id(client.kb("a", "Handbook", searchMode="hybrid", storeParameters={"table": "eddi_vectors"}, query={"adopt": "true"}))
    ingest(client, "a", kb, "ours.md", "Our own page about lounges and refunds.")
    found = client.post(f"{BASE}/{kb}/query", headers=client.keys["a"], json={"query": "refunds"}).json()["results"]
    assert {h["metadata"]["source"] for h in found} >= {"refunds.txt", "ours.md"}
    assert (columns(), indexes()) == before  # nothing of ours added
    # what an earlier version added is taken away when the KB goes
    with psycopg.connect(url, autocommit=True) as c:
        c.execute("ALTER TABLE eddi_vectors ADD COLUMN tsv tsvector GENERATED ALWAYS AS (to_tsvector('english', text)) STORED")
        c.execute("CREATE INDEX eddi_vectors_tsv ON eddi_vectors USING gin (tsv)")
    client.runtime.documents.forget_store(kb)
    assert client.delete(f"{BASE}/{kb}", headers=client.keys["a"], params={"permanent": "true"}).status_code == 200
    assert (columns(), indexes()) == before and len(langchain4j_reads(url, "eddi_vectors")) == 3
