"""Third-party packages add backends by name through entry points."""

import textwrap

from eddi_rag.backends import registry


def test_a_third_party_store_registers_through_an_entry_point(tmp_path, monkeypatch, runtime):
    (tmp_path / "acme_store.py").write_text(textwrap.dedent('''
        from eddi_rag.stores.embedded.memory import InMemoryStore

        class AcmeStore(InMemoryStore):
            """A store from another package: here, the in-memory store under another name."""
    '''))
    dist = tmp_path / "acme_store-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-store\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[eddi_rag.stores]\nacme = acme_store:AcmeStore\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    assert "acme" in registry.store_types()
    assert registry.describe(registry.STORES, "acme")["capabilities"] == ["collections", "keyword_search", "list_filtering",
                                                                         "metadata_filtering", "search"]
    kb = runtime.resources.create("rags", runtime.validate_rag({"name": "kb", "embeddingProvider": "local", "storeType": "acme"}).to_json()).id
    runtime.ingest(kb, "a.md", "Acme anvils are heavy.")
    assert runtime.query(kb, "anvil weight", min_score=0)[0].metadata["source"] == "a.md"
