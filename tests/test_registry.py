"""Third-party packages add backends by name through entry points."""

import textwrap

import pytest

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


@pytest.mark.integration
def test_every_backend_is_described_once_then_read_without_importing_any(tmp_path):
    """Issue 60: the Manager's Configuration page asked ``/providers``, which imported every client library (3 s here).
    The descriptions are kept in a file named by what they depend on; a process that finds it imports no backend."""
    import json
    import os
    import subprocess
    import sys

    probe = ("import json, sys; from eddi_rag.backends import registry; found = registry.described(); "
             "print(json.dumps([found, sorted(m for m in ('chromadb', 'qdrant_client', 'openai', 'pymongo', 'boto3') if m in sys.modules)]))")
    env = {**os.environ, "EDDI_RAG_CACHE_DIR": str(tmp_path / "cache")}

    def run(**extra: str) -> list:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env={**env, **extra})
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    first, imported = run()
    assert imported and [p.name for p in (tmp_path / "cache").iterdir()][0].startswith("backends-")
    again, imported = run()
    assert again == first and imported == []  # read from the file: no client library imported
    # a cache that cannot be written: made each time (here, in this process: a third process importing every client
    # library took 5 s beside the other tests)
    registry.forget()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("EDDI_RAG_CACHE_DIR", "/proc/no-such-place")
        assert json.loads(json.dumps(registry.described())) == first
    registry.forget()
    assert {"sqlite", "pgvector"} <= set(first["eddi_rag.stores"]) and "local" in first["eddi_rag.embeddings"]
