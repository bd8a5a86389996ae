"""EDDI since its isolation change of 2026-10-02/03 (issue 67, point 7), as its source has it (labsai/EDDI
``KnowledgeBaseStorageGuard`` and ``KnowledgeBaseStorage``, transcribed in tests/support/eddi_rules.py): a location is
written out, never a ``${vars:…}`` / ``${vault:…}`` reference, at create, import and a change of location, while a
stored one is left alone by a save that does not touch it; a location another knowledge base holds is shared only by a
caller who may edit that one ("cannot edit"), ``public.Team_Docs`` being ``team_docs``; the reserved ``eddi_kb`` prefix
in every dot-separated part; EDDI's Atlas collections read as EDDI reads them (filtered on ``kbId`` only in a collection
named outright); a Vertex ``endpoint`` through the metadata-address guard, at save too."""

from __future__ import annotations

import json

import mongomock
import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.backends.factories import EmbeddingModelFactory
from eddi_rag.common.outbound import OutboundBlockedError
from eddi_rag.config import ConfigValidationError, RagConfiguration
from eddi_rag.runtime import Runtime
from eddi_rag.stores import langchain4j
from eddi_rag.stores.base import KEYWORD_SEARCH, LIST_FILTERING, Chunk, StoreContext
from eddi_rag.stores.filters import FilterError
from eddi_rag.stores.mongodb_atlas import MongoAtlasStore, eddi_document, eddi_indexes
from eddi_rag.stores.ownership import location_errors
from eddi_rag.verbs.eddi_export import NOTES
from eddi_rag.verbs.eddi_import import ExportError, import_agent_export
from tests.support.eddi_rules import atlas_filters_retrieval, refusals
from tests.test_eddi_round_trip import IDS, WF, eddi_export, round_trip, zipped

BASE = "/ragstore/rags"
RAG = f"{WF}/1/{IDS['rag']}.rag.json"


def qdrant(name: str, collection: str | None = None, **fields) -> dict:
    """A knowledge base on Qdrant's local mode (no server), in EDDI's "id" layout unless told otherwise."""
    params = {"path": "qdrant", **({"collectionName": collection} if collection is not None else {})}
    return {"name": name, "embeddingProvider": "local", "storeType": "qdrant", "storeNamespace": "id", "minScore": 0,
            "storeParameters": params, **fields}


# --- a location is literal ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("store, key, value", [("pgvector", "table", "${vars:team-table}"), ("pgvector", "table", "x${vars:a}; DROP TABLE y --"),
                                               ("qdrant", "collectionName", "${vault:Sammlung}"), ("chroma", "collectionName", "${vars:知识库}"),
                                               ("mongodb-atlas", "collectionName", "${vars:c}"), ("elasticsearch", "indexName", "${env:INDEX}")])
def test_a_reference_as_the_location_is_refused_naming_the_field(store, key, value):
    """Was accepted: a ${vars:…} value resolved only when the store is built, after every rule had passed on its text."""
    (error,) = location_errors(store, {key: value})
    assert error["path"] == f"$.storeParameters.{key}" and error["message"].startswith("must be a literal name")
    assert location_errors(store, {key: value}, {key: value}) == []  # stored before: not judged again
    assert refusals({"name": "x", "storeType": store, "storeParameters": {key: value}})  # EDDI's import refuses it too


def test_a_reference_is_refused_at_create_and_at_a_change_of_location_but_a_stored_one_is_kept(tmp_path):
    with Runtime(tmp_path) as runtime:
        runtime.variables.put("default", "team", "team_docs")
        with pytest.raises(ConfigValidationError, match=r"\$\.storeParameters\.collectionName: must be a literal name"):
            runtime.saving.create("rags", qdrant("Wissensdatenbank Übersicht", "${vars:team}"))
        mine = runtime.saving.create("rags", qdrant("Handbuch", "handbuch_docs")).id
        with pytest.raises(ConfigValidationError, match="literal"):  # a change of location to a reference
            runtime.saving.update("rags", mine, 1, qdrant("Handbuch", "${vars:team}"))
        assert runtime.resources.current_version("rags", mine) == 1  # nothing written

        stored = runtime.resources.create("rags", qdrant("知识库", "${vars:team}")).id  # saved before the rule
        ref = runtime.saving.update("rags", stored, 1, qdrant("知识库 (neu)", "${vars:team}", maxResults=3))
        assert ref.version == 2 and runtime.resources.read("rags", stored)["storeParameters"]["collectionName"] == "${vars:team}"
        with pytest.raises(ConfigValidationError, match="literal"):  # another store type: a new location
            runtime.saving.update("rags", stored, 2, {**qdrant("知识库", "${vars:team}"), "storeType": "chroma",
                                                      "storeParameters": {"collectionName": "${vars:team}"}})


def test_an_import_refuses_a_location_eddi_refuses_naming_its_file_and_field(tmp_path):
    with Runtime(tmp_path) as runtime:
        for table in ("${vars:t}", "public.EDDI_KB_other"):
            rag = {"name": "handbook", "embeddingProvider": "openai", "embeddingParameters": {"apiKey": "${vault:k}"},
                   "storeType": "pgvector", "storeNamespace": "id", "storeParameters": {"password": "${vault:pg}", "table": table}}
            with pytest.raises(ExportError, match=r"rag\.json: \$\.storeParameters\.table: (must be a literal|may not start)"):
                import_agent_export(runtime.resources, zipped(eddi_export(rag)), checked=runtime.knowledge_bases.checked)
            assert runtime.resources.ids("rags") == []  # nothing imported


def test_an_export_leaves_out_a_location_eddi_would_refuse_and_keeps_it_in_its_notes(tmp_path):
    with Runtime(tmp_path) as runtime:
        first, _ = round_trip(runtime, eddi_export({"name": "x", "embeddingProvider": "ollama"}))
        kb = next(r.id for r in first.created if r.kind == "rags")
        stored = qdrant("Teamdokumente", "${vars:team}")  # saved before the rule
        runtime.resources.update("rags", kb, 1, {**stored, "embeddingProvider": "ollama"})
        workflow = json.dumps(runtime.resources.read("workflows", WF)).replace(f"{kb}?version=1", f"{kb}?version=2")
        runtime.resources.update("workflows", WF, 1, json.loads(workflow))
        agent = first.agents[0].id
        runtime.resources.update("agents", agent, 1, {"workflows": [f"eddi://ai.labs.workflow/workflowstore/workflows/{WF}?version=2"]})
        from eddi_rag.verbs.eddi_export import export_agent
        from tests.test_eddi_round_trip import unzipped

        exported = unzipped(export_agent(runtime.resources, agent))
        path = f"{WF}/2/{kb}.rag.json"
        written = json.loads(exported[path])
        assert refusals(written) == [] and "collectionName" not in written["storeParameters"]
        (entry,) = json.loads(exported[NOTES])["leftOut"]
        assert entry["replaced"]["storeParameters"]["collectionName"] == "${vars:team}"


# --- sharing a location needs edit rights on the knowledge base that has it ------------------------------------------------

@pytest.fixture
def team(tmp_path):
    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as client:
        client.runtime = runtime
        client.keys = {who: {"Authorization": f"Bearer {runtime.keys.create('A', role, user=who)[1]}"}
                       for who, role in (("alice", "editor"), ("bob", "editor"), ("admin", "admin"))}
        yield client
    runtime.close()


def created(response) -> str:
    assert response.status_code == 201, response.text
    return response.headers["Location"].split("/")[-1].split("?")[0]


def test_a_location_another_knowledge_base_has_is_shared_only_by_whoever_may_edit_that_one(team):
    """Was shared by any editor of the tenant: EDDI's guard asks for EDIT on the other knowledge base ("cannot edit")."""
    keys = team.keys
    one = created(team.post(BASE, headers=keys["alice"], json=qdrant("Team-Handbuch", "team_docs")))
    team.runtime.grants.set("A", one, [{"principal": "user:alice", "access": "EDIT"}])
    for spelling in ("team_docs", "Team_Docs", " TEAM_DOCS "):  # one place however it is spelled
        r = team.post(BASE, headers=keys["bob"], json=qdrant("Bobs Notizen", spelling))
        assert r.status_code == 400 and "which you cannot edit" in r.json()["error"], r.text
        assert one not in r.text  # the other one is not named: bob may not even see it
    two = created(team.post(BASE, headers=keys["alice"], json=qdrant("团队文档", "Team_Docs")))  # alice may edit it
    created(team.post(BASE, headers=keys["admin"], json=qdrant("Admin", "team_docs")))  # an admin may edit every one
    team.runtime.grants.set("A", one, [{"principal": "user:alice", "access": "EDIT"}, {"principal": "user:bob", "access": "EDIT"}])
    three = created(team.post(BASE, headers=keys["bob"], json=qdrant("Bobs Notizen", "team_docs")))
    # a location a knowledge base holds already is not judged again: bob's save of his own, after losing EDIT on one
    team.runtime.grants.set("A", one, [{"principal": "user:alice", "access": "EDIT"}])
    r = team.put(f"{BASE}/{three}", headers=keys["bob"], params={"version": 1}, json=qdrant("Bobs Notizen", "team_docs", maxResults=3))
    assert r.status_code == 200, r.text
    holders = {c["kb_id"] for c in team.runtime.stores.ownership.holders(team.runtime.stores.place(one, team.runtime.rag_config(one)))}
    assert {one, two, three} <= holders


def test_public_team_docs_is_team_docs_and_every_dotted_part_is_checked_for_the_reserved_prefix(tmp_path):
    with Runtime(tmp_path) as runtime:
        def place(table: str) -> str:
            config = RagConfiguration.model_validate({"name": "x", "storeType": "pgvector", "storeNamespace": "id",
                                                      "storeParameters": {"password": "p", "table": table}})
            return runtime.stores.place("kb", config).name

        assert {place(t) for t in ("public.Team_Docs", "team_docs", "PUBLIC.TEAM_DOCS", " team_docs ")} == {"team_docs"}
    for store, key, value in (("pgvector", "table", "public.Eddi_Kb_handbuch"), ("qdrant", "collectionName", "team.EDDI_KBID_x"),
                              ("mongodb-atlas", "collectionName", "eddi.eddi_kb_Übersicht")):
        (error,) = location_errors(store, {key: value})
        assert error["path"] == f"$.storeParameters.{key}" and "may not start with 'eddi_kb'" in error["message"]
    assert location_errors("qdrant", {"collectionName": "team.docs_eddi_kb"}) == []  # the prefix, not anywhere


# --- EDDI's Atlas collections, read as EDDI reads them -------------------------------------------------------------------

class _Session:
    """mongomock has no sessions: each operation of a transaction runs as it comes."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def start_transaction(self):
        return self


def atlas(kb_id: str, namespace: str, name: str = "Hilfe Desk", **params) -> MongoAtlasStore:
    """An Atlas store over mongomock (no MongoDB here) with the parameters the factory gives it in EDDI's layout;
    its bulk writes and sessions as mongomock can run them."""
    given = langchain4j.adopt("mongodb-atlas", namespace, kb_id, name, {"connectionString": "mongodb://atlas", **params})
    context = StoreContext()
    client = mongomock.MongoClient()
    client.start_session = _Session
    context.state["mongodb-clients"] = {"mongodb://atlas": client}
    store = MongoAtlasStore(kb_id, given, context)
    collection = store.collection
    collection.bulk_write = lambda ops, ordered=True, session=None: [collection.replace_one(o._filter, o._doc, upsert=o._upsert) for o in ops]
    delete_many = collection.delete_many
    collection.delete_many = lambda query, session=None: delete_many(query)
    return store


def test_atlas_in_eddis_layout_is_saved_and_named_as_eddi_names_it(runtime):
    """Was a 400 naming storeNamespace ("adopting an EDDI store in place works on pgvector, chroma, qdrant so far")."""
    body = {"name": "Hilfe Desk", "embeddingProvider": "local", "storeType": "mongodb-atlas", "storeNamespace": "id",
            "storeParameters": {"connectionString": "${env:MONGODB_URI}"}}
    saved = runtime.knowledge_bases.checked("rags", body, "default")
    config = RagConfiguration.model_validate(saved)
    assert (config.eddi_layout, config.searchMode, config.chunkStrategy) == ("id", "vector", "recursive")  # EDDI's defaults
    with pytest.raises(ConfigValidationError) as e:
        runtime.knowledge_bases.checked("rags", {**body, "searchMode": "hybrid"}, "default")
    assert e.value.errors[0]["path"] == "$.searchMode"
    # EDDI's defaultPhysicalName: Atlas' name layout is LEGACY_PREFIX + the name as written; "id" the id, sanitised
    assert langchain4j.physical_name("mongodb-atlas", "name", "kb-1", "Hilfe Desk") == "eddi_kb_Hilfe Desk"
    assert langchain4j.physical_name("mongodb-atlas", "id", "65f0-AA", "x") == "eddi_kbid_65f0_aa"


def test_atlas_retrieval_is_filtered_on_kb_id_only_in_a_collection_named_outright(monkeypatch):
    """EDDI's KnowledgeBaseStorage.filtersRetrieval: Atlas refuses a filter on a field its index does not declare, so a
    knowledge base on its own default collection is not filtered (before: filtered everywhere in the "id" layout)."""
    own, shared = atlas("kb1", "id"), atlas("kb1", "id", collectionName="team_docs")
    assert own.collection.name == "eddi_kbid_kb1" and own.scope == {}
    assert shared.collection.name == "team_docs" and shared.scope == {"metadata.kbId": "kb1"}
    assert not atlas_filters_retrieval({"storeNamespace": "id", "storeParameters": {}})
    assert atlas_filters_retrieval({"storeNamespace": "id", "storeParameters": {"collectionName": "team_docs"}})
    assert atlas("kb1", "name").scope == {}  # 6.5.0's chunks carry no id: never filtered
    for store, expected in ((own, None), (shared, {"metadata.kbId": "kb1"})):
        store.collection.insert_one(eddi_document(Chunk("seed", "seed", {"kbId": "kb1"}), [1.0, 0.0]))
        asked = []
        monkeypatch.setattr(type(store.collection), "aggregate", lambda self, pipeline: asked.append(pipeline) or [], raising=False)
        store.search([1.0, 0.0], 3)
        assert asked and asked[0][0]["$vectorSearch"].get("filter") == expected
        monkeypatch.undo()


def test_eddis_atlas_documents_are_read_and_written_in_place():
    """langchain4j's MongoDbEmbeddingStore documents ({_id: UUID, embedding, text, metadata}): EDDI's own read here with
    their source as the document; ours written so EDDI reads them; each knowledge base sees its own in a shared one."""
    store = atlas("kb1", "id", collectionName="team_docs")
    assert {LIST_FILTERING, KEYWORD_SEARCH}.isdisjoint(store.capabilities)
    eddis = {"_id": "0b7e4c1e-8f1a-4a44-9a52-6c2d1c1f9a10", "embedding": [0.6, 0.8], "text": "Erstattungen dauern 14 Tage.",
             "metadata": {"source": "erstattung.txt", "kbId": "kb1"}}
    other = {**eddis, "_id": "1c8f5d2f-9a2b-4b55-8b63-7d3e2d2fab21", "metadata": {"source": "x.txt", "kbId": "kb2"}}
    store.collection.insert_many([eddis, other])
    (chunk,) = store.get()
    assert (chunk.id, chunk.metadata["document_id"], chunk.vector) == (eddis["_id"], "erstattung.txt", [0.6, 0.8])
    store.upsert([Chunk("kb1:faq.md:0", "退款需要十四天。", {"kbId": "kb1", "document_id": "faq.md", "private": False}, [0.8, 0.6])])
    written = store.collection.find_one({"text": "退款需要十四天。"})
    assert written["_id"] == langchain4j.row_id("kb1:faq.md:0") and set(written) == {"_id", "embedding", "text", "metadata"}
    assert written["metadata"] == {"kbId": "kb1", "document_id": "faq.md", "private": "false", "chunkId": "kb1:faq.md:0"}
    assert store.count() == 2 and store.count({"document_id": "erstattung.txt"}) == 1
    assert [c.id for c in store.get(ids=["kb1:faq.md:0"])] == ["kb1:faq.md:0"]
    assert store.delete(where={"document_id": "faq.md"}) == 1 and store.count() == 1
    store.replace({"document_id": "erstattung.txt"}, [])
    assert store.count() == 0 and store.collection.count_documents({}) == 1  # kb2's document untouched
    with pytest.raises(FilterError):  # langchain4j's metadata holds scalars only
        store.get({"acl": {"$containsAny": ["group:hr"]}})
    assert store.keyword_search("Erstattungen", 3) == []  # EDDI's collection has no text index
    (vector,) = (m.document for m in eddi_indexes("vector_index", 384))
    assert {"type": "filter", "path": "metadata.kbId"} in vector["definition"]["fields"]  # EDDI's filter field, declared


# --- a Vertex endpoint goes through the metadata-address guard ----------------------------------------------------------

@pytest.mark.parametrize("endpoint", ["http://169.254.169.254/v1", "http://metadata.google.internal/", "https://[::ffff:169.254.169.254]/",
                                      "http://2852039166/"])
def test_a_vertex_endpoint_at_a_metadata_address_is_refused_at_save_and_when_built(runtime, endpoint):
    """Was saved (and refused only when the model was built)."""
    body = {"name": "Vertex", "embeddingProvider": "vertex", "embeddingParameters": {"project": "p", "endpoint": endpoint}}
    with pytest.raises(ConfigValidationError) as e:
        runtime.saving.create("rags", body)
    assert e.value.errors[0]["path"] == "$.embeddingParameters.endpoint" and "metadata" in e.value.errors[0]["message"]
    with pytest.raises(OutboundBlockedError, match="endpoint"):
        EmbeddingModelFactory(None).get("vertex", {"project": "p", "endpoint": endpoint})
    fine = {**body, "embeddingParameters": {"project": "p", "endpoint": "https://europe-west3-aiplatform.googleapis.com"}}
    assert runtime.saving.create("rags", fine).version == 1
    assert runtime.saving.create("rags", {**body, "embeddingParameters": {"project": "p", "endpoint": "${vars:vertexEndpoint}"}})
