"""EDDI both ways (issue 42, point 5 and 7): an export of today's EDDI, which stamps ``storeNamespace: "id"`` on every
knowledge base it creates, duplicates or imports (``KnowledgeBaseStorageGuard.prepareNew``), in-memory included,
imports here; every export of ours passes EDDI's import rules (``tests/support/eddi_rules.py``, read from its
source), what EDDI would refuse written as EDDI's nearest value with ours kept in the export's notes and put back by
our import; and the scrubber judges a field by what it is."""

from __future__ import annotations

import json

import pytest

from eddi_rag.runtime import Runtime
from eddi_rag.verbs.eddi_export import NOTES, ExportRefusedError, export_agent, scrub
from eddi_rag.verbs.eddi_import import import_agent_export
from tests.support.eddi_rules import dropped, llm_dropped, llm_refusals, refusals
from tests.test_eddi_round_trip import IDS, WF, eddi_export, round_trip, unzipped, zipped

RAG = f"{WF}/1/{IDS['rag']}.rag.json"
LLM = f"{WF}/1/{IDS['langchain']}.langchain.json"


def held_to_eddis_rules(exported: dict[str, bytes]) -> None:
    """Every RagConfiguration and LLM configuration of an export passes EDDI's import rules (tests/support/eddi_rules.py)."""
    for path, body in exported.items():
        if path.endswith(".rag.json"):
            rag = json.loads(body)
            assert refusals(rag) == [] and dropped(rag) == [], (path, refusals(rag), dropped(rag))
        elif path.endswith(".langchain.json"):
            llm = json.loads(body)
            assert llm_refusals(llm) == [] and llm_dropped(llm) == [], (path, llm_refusals(llm), llm_dropped(llm))

# What this product's own knowledge bases hold that EDDI does not have, one of each.
OURS = [
    {"name": "readme", "embeddingProvider": "local", "storeType": "sqlite", "chunkStrategy": "markdown"},
    {"name": "vec", "embeddingProvider": "local", "embeddingParameters": {"batchTokens": 256}, "storeType": "sqlite-vec",
     "storeParameters": {"path": "vectors.db"}},
    {"name": "typesense", "embeddingProvider": "google", "embeddingParameters": {"model": "text-embedding-004", "apiKey": "${vault:g}"},
     "storeType": "typesense", "storeParameters": {"host": "search.internal", "apiKey": "${vault:ts}"}},
    {"name": "memory", "embeddingProvider": "openai", "embeddingParameters": {"apiKey": "${vault:k}"}, "storeType": "in-memory", "chunkStrategy": "sentence",
     "sources": [{"id": "manuals", "name": "Manuals", "type": "folder", "folder": {"path": "manuals"}},
                 {"id": "site", "name": "Site", "type": "web", "web": {"startUrl": "https://docs.example.com/",
                                                                        "userAgent": "AcmeDocsBot/2.1 (+k9XqZ2mW7vB4nL8t)",
                                                                        "pathPrefix": "/v3/Zq8RwX2kP9mL4vT7"}}]},
    {"name": "finance", "embeddingProvider": "openai", "embeddingParameters": {"apiKey": "${vault:k}"}, "storeType": "in-memory",
     "audience": "OWNER", "aclMode": "warn", "owner": "user:alice"},  # EDDI has no audience yet: in the notes
    # EDDI's rules of 2026-10 (issue 56, finding 11): a web source on a private or loopback address refuses the whole
    # agent there; our own fields (and ours inside a web source) would be dropped by its import
    {"name": "intranet", "embeddingProvider": "openai", "embeddingParameters": {"apiKey": "${vault:k}"}, "storeType": "in-memory",
     "sources": [{"id": "wiki", "name": "Wiki", "type": "web", "web": {"startUrl": "http://10.1.2.3/wiki/"}},
                 {"id": "local", "name": "Local", "type": "web", "web": {"startUrl": "https://docs.example.com/",
                                                                         "sitemapUrls": ["http://localhost:8080/sitemap.xml"]}},
                 {"id": "public", "name": "Public", "type": "web", "web": {"startUrl": "https://www.example.com/"}}]},
    {"name": "tuned", "embeddingProvider": "openai", "embeddingParameters": {"apiKey": "${vault:k}"}, "storeType": "in-memory",
     "searchMode": "hybrid", "contextExpansion": "section", "maxPassageChars": 3000, "vectorWeight": 0.7, "language": ["de", "en"],
     "sources": [{"id": "site", "name": "Site", "type": "web", "settings": {"acl": ["group:staff"]},
                  "web": {"startUrl": "https://docs.example.com/", "include": ["/docs/*"]}}]},
]


def test_an_export_of_todays_eddi_imports_in_memory_with_its_store_namespace(tmp_path):
    """Was a 400 for the whole zip: "adopting an EDDI store in place works on pgvector, chroma, qdrant so far"."""
    rag = {"name": "handbook", "embeddingProvider": "openai", "embeddingParameters": {"apiKey": "${vault:openaiKey}"},
           "storeType": "in-memory", "storeNamespace": "id", "chunkStrategy": "recursive", "chunkSize": 512,
           "chunkOverlap": 64, "maxResults": 5, "minScore": 0.6, "sources": []}
    with Runtime(tmp_path) as runtime:
        report, after = round_trip(runtime, eddi_export(rag))
        kb = next(r.id for r in report.created if r.kind == "rags")
        assert runtime.resources.read("rags", kb)["storeNamespace"] == "id"  # kept for the way back
        assert json.loads(after[RAG]) == rag and NOTES not in after  # the same JSON back, its empty sources too
        assert runtime.rag_config(kb).eddi_layout is None  # in-memory: its store is its own whatever the layout


@pytest.mark.parametrize("config", OURS, ids=[c["name"] for c in OURS])
def test_every_export_of_ours_passes_eddis_rules_and_comes_back_as_it_was(tmp_path, config):
    with Runtime(tmp_path) as runtime:
        (tmp_path / "manuals").mkdir()
        _, exported = round_trip(runtime, eddi_export(config))
        written = json.loads(exported[RAG])
        held_to_eddis_rules(exported)
        notes = json.loads(exported[NOTES])
        (entry,) = notes["leftOut"]
        assert entry["file"] == RAG and (entry.get("replaced") or entry.get("sources"))
        assert not {"audience", "aclMode", "owner"} & set(written)
        if config["embeddingProvider"] == "local":  # EDDI's nearest: the same model, served by Ollama
            assert (written["embeddingProvider"], written["embeddingParameters"]) == ("ollama", {"model": "all-minilm"})
        again = import_agent_export(runtime.resources, zipped(exported), checked=runtime.knowledge_bases.checked)
        back = runtime.resources.read("rags", next(r.id for r in again.created if r.kind == "rags"))
        assert {k: v for k, v in back.items() if k != "sources"} == {k: v for k, v in config.items() if k != "sources"}
        assert sorted(s["id"] for s in back.get("sources") or []) == sorted(s["id"] for s in config.get("sources") or [])


def test_an_atlas_knowledge_base_in_eddis_layout_exports_as_eddi_has_it(tmp_path):
    """Issue 67, point 7: EDDI's Atlas collections are read in place (storeNamespace on mongodb-atlas was a 400), so an
    EDDI export naming one imports, and goes back as it came: nothing left out, EDDI's rules held."""
    rag = {"name": "Kundendienst", "embeddingProvider": "openai", "embeddingParameters": {"apiKey": "${vault:k}"},
           "storeType": "mongodb-atlas", "storeNamespace": "id",
           "storeParameters": {"connectionString": "${vault:atlas}", "databaseName": "eddi", "collectionName": "team_docs"}}
    with Runtime(tmp_path) as runtime:
        report, exported = round_trip(runtime, eddi_export(rag))
        assert json.loads(exported[RAG]) == rag and NOTES not in exported
        held_to_eddis_rules(exported)
        kb = next(r.id for r in report.created if r.kind == "rags")
        assert runtime.rag_config(kb).eddi_layout == "id"


def test_the_readmes_knowledge_base_exports_to_what_eddi_imports(tmp_path):
    """The README's example KB (local, sqlite, markdown): "eddi-rag export writes an export EDDI imports" was false."""
    from eddi_rag.tools.bundle import load_bundle
    from tests.test_eddi_compat import EXAMPLES

    with Runtime(tmp_path) as runtime:
        load_bundle(runtime.saving, EXAMPLES)
        exported = unzipped(export_agent(runtime.resources, "travel-assistant"))
        rags = [json.loads(body) for path, body in exported.items() if path.endswith(".rag.json")]
        assert rags and all(refusals(r) == [] for r in rags), [refusals(r) for r in rags]
        assert all(llm_refusals(json.loads(b)) == [] for p, b in exported.items() if p.endswith(".langchain.json"))


def test_a_provider_with_no_counterpart_in_eddi_refuses_the_export_naming_it(tmp_path):
    with Runtime(tmp_path) as runtime:
        first = import_agent_export(runtime.resources, zipped(eddi_export({"name": "x", "embeddingProvider": "ollama"})))
        kb = next(r.id for r in first.created if r.kind == "rags")
        runtime.resources.update("rags", kb, 1, {"name": "x", "embeddingProvider": "my-plugin"})
        runtime.resources.update("workflows", WF, 1, json.loads(json.dumps(runtime.resources.read("workflows", WF))
                                                                .replace(f"{kb}?version=1", f"{kb}?version=2")))
        runtime.resources.update("agents", first.agents[0].id, 1, {"workflows": [
            f"eddi://ai.labs.workflow/workflowstore/workflows/{WF}?version=2"]})
        with pytest.raises(ExportRefusedError, match="embeddingProvider 'my-plugin' has no counterpart in EDDI"):
            export_agent(runtime.resources, first.agents[0].id)


def test_the_scrubber_judges_a_field_by_what_it_is():
    """Finding 7: web.userAgent, web.pathPrefix, folder.path, organizationId, projectId were redacted as random-looking
    strings; a re-imported folder source ended with ``path: ${vault:REDACTED}``."""
    kept = {"web": {"userAgent": "AcmeBot/2.1 (+k9XqZ2mW7vB4nL8t)", "pathPrefix": "/v3/Zq8RwX2kP9mL4vT7"},
            "folder": {"path": "/srv/docs/k9XqZ2mW7vB4nL8tQ3"},
            "embeddingParameters": {"organizationId": "org-k9XqZ2mW7vB4nL8tQ3rS", "projectId": "proj_Zq8RwX2kP9mL4vT7"}}
    assert scrub(kept) == kept
    secret = {"embeddingParameters": {"apiKey": "sk-abc", "extra": "k9XqZ2mW7vB4nL8tQ3rSx7"}}
    assert scrub(secret) == {"embeddingParameters": {"apiKey": "${vault:REDACTED}", "extra": "${vault:REDACTED}"}}
    assert scrub(secret, names_only=True)["embeddingParameters"]["extra"] == "k9XqZ2mW7vB4nL8tQ3rSx7"  # the notes


def test_a_folder_source_comes_back_with_its_path(tmp_path):
    with Runtime(tmp_path) as runtime:
        (tmp_path / "k9XqZ2mW7vB4nL8tQ3").mkdir()
        rag = {"name": "x", "embeddingProvider": "ollama", "sources": [
            {"id": "f", "name": "F", "type": "folder", "folder": {"path": "k9XqZ2mW7vB4nL8tQ3"}}]}
        _, exported = round_trip(runtime, eddi_export(rag))
        again = import_agent_export(runtime.resources, zipped(exported), checked=runtime.knowledge_bases.checked)
        back = runtime.resources.read("rags", next(r.id for r in again.created if r.kind == "rags"))
        assert back["sources"][0]["folder"]["path"] == "k9XqZ2mW7vB4nL8tQ3"



def test_a_start_url_eddi_refuses_is_told_as_eddi_tells_it():
    """EDDI's requireRoutableHost: a literal (digits and dots, or a colon) read as an address, or localhost; a name is
    never resolved. An IPv4-mapped loopback and the one-number form of 169.254.169.254 are literals too."""
    from eddi_rag.verbs.eddi_export import routable
    from tests.support.eddi_rules import routable as eddi_reads

    for url in ("http://10.1.2.3/", "http://127.0.0.1:8080/", "http://localhost/", "http://[::1]/", "http://[fe80::1]/",
                "http://0.0.0.0/", "http://172.20.0.1/", "http://[::ffff:127.0.0.1]/", "http://2852039166/"):
        assert not routable(url), url
    for url in ("https://docs.example.com/", "http://8.8.8.8/", "http://0xa9fea9fe/", "http://intranet/"):
        assert routable(url), url
        assert eddi_reads(url), url
