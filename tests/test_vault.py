"""EDDI's secrets vault (issue 33, point 4): ``/secretstore/secrets`` with EDDI's paths and JSON, values that go in
and never come out (not in a response, a log, a row of the database), envelope encryption with a data key per
tenant wrapped by the master key, rotation of either key, tenants kept apart, and ``${vault:…}`` resolving from it
in a knowledge base's configuration, heard by a loopback stand-in of OpenAI's API."""

from __future__ import annotations

import logging

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.common.secrets import SecretNotFoundError
from eddi_rag.records.vault import VaultKeyMismatchError
from eddi_rag.runtime import Runtime
from tests.support.openai_server import OpenAIStandIn

VAULT = "/secretstore/secrets"
MASTER = "a master passphrase for the tests"
NEW = "another master passphrase, rotated"
SECRET = "sk-live-0123456789abcdefghij"


@pytest.fixture
def vaulted(tmp_path, monkeypatch):
    """A client over a runtime whose vault has a master key, with an admin, an editor and a viewer of tenant A, an admin of
    B and the operator (an admin of the default tenant)."""
    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", MASTER)
    runtime = Runtime(tmp_path / "data")
    with TestClient(create_app(runtime), raise_server_exceptions=False) as client:
        client.runtime = runtime
        client.a = {"Authorization": f"Bearer {runtime.keys.create('A', 'admin')[1]}"}
        client.a_editor = {"Authorization": f"Bearer {runtime.keys.create('A', 'editor')[1]}"}
        client.a_viewer = {"Authorization": f"Bearer {runtime.keys.create('A', 'viewer')[1]}"}
        client.b = {"Authorization": f"Bearer {runtime.keys.create('B', 'admin')[1]}"}
        client.operator = {"Authorization": f"Bearer {runtime.keys.create('default', 'admin')[1]}"}
        yield client
    runtime.close()


def test_a_secret_round_trips_eddi_s_json_and_its_value_never_comes_back(vaulted, caplog):
    c = vaulted
    caplog.set_level(logging.DEBUG)
    r = c.put(f"{VAULT}/A/openai-key", headers=c.a_editor, json={"value": SECRET, "description": "OpenAI, production"})
    assert r.status_code == 201 and r.json() == {"reference": "${vault:A/openai-key}", "tenantId": "A", "keyName": "openai-key"}
    again = c.put(f"{VAULT}/A/openai-key", headers=c.a_editor, json={"value": SECRET + "x", "allowedAgents": ["agent-1"]})
    assert again.status_code == 200
    meta = c.get(f"{VAULT}/A/openai-key", headers=c.a_editor).json()
    # no checksum over REST (EDDI removed it: an unsalted SHA-256 let a dictionary recover weak values offline)
    assert set(meta) == {"tenantId", "keyName", "createdAt", "lastAccessedAt", "lastRotatedAt", "description", "allowedAgents"}
    assert meta["allowedAgents"] == ["agent-1"]
    assert meta["lastRotatedAt"] is not None and meta["description"] == "OpenAI, production"  # a rotation keeps it
    assert [m["keyName"] for m in c.get(f"{VAULT}/A", headers=c.a_editor).json()] == ["openai-key"]

    # the value is nowhere: not in an answer, a log line, nor any column of the state database
    everything = " ".join(str(tuple(row)) for table in ("vault_secrets", "vault_deks", "vault_meta")
                          for row in c.runtime.db.query(f"SELECT * FROM {table}"))
    assert SECRET not in everything and SECRET not in caplog.text
    assert SECRET not in c.get(f"{VAULT}/A", headers=c.a_editor).text

    # roles: an editor stores and reads metadata; deleting is an administrator's; a viewer does neither
    assert c.get(f"{VAULT}/A", headers=c.a_viewer).status_code == 403
    assert c.delete(f"{VAULT}/A/openai-key", headers=c.a_editor).status_code == 403
    assert c.delete(f"{VAULT}/A/openai-key", headers=c.a).status_code == 204
    assert c.get(f"{VAULT}/A/openai-key", headers=c.a).status_code == 404
    assert c.delete(f"{VAULT}/A/openai-key", headers=c.a).status_code == 404


def test_tenants_are_kept_apart_and_bad_names_are_refused(vaulted):
    c = vaulted
    assert c.put(f"{VAULT}/A/k", headers=c.a, json={"value": SECRET}).status_code == 201
    for method, path in (("get", f"{VAULT}/A"), ("get", f"{VAULT}/A/k"), ("delete", f"{VAULT}/A/k"),
                         ("put", f"{VAULT}/A/k"), ("post", f"{VAULT}/A/rotate-dek"), ("post", f"{VAULT}/A/reset")):
        r = c.request(method, path, headers=c.b, json={"value": "taken over"} if method == "put" else None)
        assert r.status_code == 404, (method, path, r.text)
    assert c.get(f"{VAULT}/B", headers=c.b).json() == []
    bad = c.put(f"{VAULT}/A/bad%20name", headers=c.a, json={"value": SECRET})
    assert bad.status_code == 400 and "keyName" in bad.text
    empty = c.put(f"{VAULT}/A/k2", headers=c.a, json={"value": ""})
    assert empty.status_code == 400 and "value" in empty.text  # (400 as EDDI answers, not FastAPI's 422)


def test_vault_references_resolve_in_their_own_tenant_only(vaulted):
    c, resolver = vaulted, vaulted.runtime.resolver
    c.put(f"{VAULT}/A/openai-key", headers=c.a, json={"value": SECRET})
    assert resolver.resolve("${vault:openai-key}", "A") == SECRET
    assert resolver.resolve("${eddivault:A/openai-key}", "A") == SECRET  # EDDI's full form and older spelling
    for tenant, reference in (("B", "${vault:openai-key}"), ("B", "${vault:A/openai-key}"), ("default", "${vault:A/openai-key}")):
        with pytest.raises(SecretNotFoundError):
            resolver.resolve(reference, tenant)
    assert resolver.redact(f"the key {SECRET} leaked") == "the key *** leaked"


def test_a_knowledge_base_uses_a_key_stored_in_the_vault(vaulted):
    """A cloud KB whose apiKey is a vault reference: saved, then used once the key is stored; the stand-in of
    OpenAI's API hears the stored key, in this tenant only."""
    c = vaulted
    with OpenAIStandIn() as openai:
        body = {"name": "cloud", "embeddingProvider": "openai", "storeType": "sqlite",
                "embeddingParameters": {"apiKey": "${vault:openai-key}", "baseUrl": openai.base_url, "dimensions": 8, "maxRetries": 0}}
        kb = c.post("/ragstore/rags", headers=c.a, json=body).headers["Location"].split("/")[-1].split("?")[0]
        docs = {"documents": [{"document_id": "a", "text": "Refunds take seven days."}]}
        before = c.post(f"/ragstore/rags/{kb}/documents", headers=c.a, json=docs).json()
        assert before["documents_failed"] == 1 and "${vault:openai-key} is not set" in str(before["errors"])
        c.put(f"{VAULT}/A/openai-key", headers=c.a, json={"value": SECRET})
        assert c.post(f"/ragstore/rags/{kb}/documents", headers=c.a, json=docs).json()["embedding_count"] == 1
        (call,) = openai.calls("/embeddings")
        assert call["headers"]["authorization"] == f"Bearer {SECRET}"
        assert c.get(f"{VAULT}/A/openai-key", headers=c.a).json()["lastAccessedAt"] is not None


def test_rotating_the_data_key_and_the_master_key_keeps_every_secret(vaulted, tmp_path, monkeypatch):
    c = vaulted
    for n in range(3):
        c.put(f"{VAULT}/A/key-{n}", headers=c.a, json={"value": f"{SECRET}-{n}"})
    before = {r["key_name"]: r["ciphertext"] for r in c.runtime.db.query("SELECT key_name, ciphertext FROM vault_secrets")}
    r = c.post(f"{VAULT}/A/rotate-dek", headers=c.a)
    assert r.status_code == 200 and r.json()["secretsReEncrypted"] == 3
    after = {r["key_name"]: r["ciphertext"] for r in c.runtime.db.query("SELECT key_name, ciphertext FROM vault_secrets")}
    assert all(before[k] != after[k] for k in before)
    assert c.runtime.resolver.resolve("${vault:key-1}", "A") == f"{SECRET}-1"

    assert c.post(f"{VAULT}/admin/rotate-kek", headers=c.b, json={"oldMasterKey": MASTER, "newMasterKey": NEW}).status_code == 404
    wrong = c.post(f"{VAULT}/admin/rotate-kek", headers=c.a, json={"oldMasterKey": "not it", "newMasterKey": NEW})
    assert wrong.status_code == 404  # (only the default tenant's administrators rotate the master key)
    c.runtime.close()

    # the operator (an administrator of the default tenant) rotates it; the new key reads every secret
    with Runtime(tmp_path / "data") as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as op:
        operator = {"Authorization": f"Bearer {runtime.keys.create('default', 'admin')[1]}"}
        rotate = lambda old, new: op.post(f"{VAULT}/admin/rotate-kek", headers=operator, json={"oldMasterKey": old, "newMasterKey": new})  # noqa: E731
        assert rotate("not it", NEW).status_code == 409
        for weak in ("short", "y" * 20, "changeme-changeme"):  # the master-key strength gate, as EDDI's
            refused = rotate(MASTER, weak)
            assert refused.status_code == 400 and "newMasterKey" in refused.text, refused.text  # (a short one: the schema's)
        done = rotate(MASTER, NEW)
        assert done.status_code == 200 and done.json()["deksReEncrypted"] == 1
        assert runtime.resolver.resolve("${vault:key-2}", "A") == f"{SECRET}-2"  # at once, before a restart
    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", NEW)
    with Runtime(tmp_path / "data") as runtime:
        assert runtime.resolver.resolve("${vault:key-0}", "A") == f"{SECRET}-0"
    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", MASTER)  # the old key no longer reads them: said, never garbage
    with Runtime(tmp_path / "data") as runtime, pytest.raises(VaultKeyMismatchError, match="EDDI_VAULT_MASTER_KEY"):
        runtime.resolver.resolve("${vault:key-0}", "A")


def test_without_a_master_key_the_vault_says_how_to_turn_it_on_and_variables_still_resolve(tmp_path, monkeypatch):
    monkeypatch.delenv("EDDI_VAULT_MASTER_KEY", raising=False)
    monkeypatch.setenv("EDDI_VAULT_OPENAI_KEY", "sk-from-the-environment")
    with Runtime() as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as c:  # (no folder for a key)
        r = c.put(f"{VAULT}/default/openai-key", json={"value": SECRET})
        assert r.status_code == 503 and "EDDI_VAULT_MASTER_KEY" in r.json()["error"]
        assert c.get(f"{VAULT}/health").status_code == 503 and c.get(f"{VAULT}/health").json()["status"] == "DOWN"
        assert runtime.resolver.resolve("${vault:openai-key}") == "sk-from-the-environment"  # the documented fallback


def test_an_eddi_export_s_vault_references_resolve_once_its_keys_are_stored(vaulted):
    """An EDDI team's agent export names its keys as ${vault:…}: imported as it is, it works once the tenant stores
    them, as it did in EDDI."""
    from tests.test_eddi_import import RAG, export_zip

    c = vaulted
    with OpenAIStandIn() as openai:
        rag = {"name": "Handbook", "embeddingProvider": "openai", "storeType": "sqlite", "minScore": 0,
               "embeddingParameters": {"apiKey": "${vault:openai-key}", "baseUrl": openai.base_url, "dimensions": 8, "maxRetries": 0}}
        r = c.post("/backup/import", headers={**c.a, "Content-Type": "application/zip"}, content=export_zip(rag=rag))
        assert r.status_code == 201, r.text
        kb = next(uri for uri in r.json()["created"] if "/ragstore/rags/" in uri).split("/")[-1].split("?")[0]
        assert kb == RAG  # (the export's id, free here)
        docs = {"documents": [{"document_id": "a", "text": "Refunds are paid within 14 days."}]}
        assert c.post(f"/ragstore/rags/{kb}/documents", headers=c.a, json=docs).json()["documents_failed"] == 1
        assert c.put(f"{VAULT}/A/openai-key", headers=c.a, json={"value": SECRET}).status_code == 201
        assert c.post(f"/ragstore/rags/{kb}/documents", headers=c.a, json=docs).json()["embedding_count"] == 1
        assert openai.calls("/embeddings")[0]["headers"]["authorization"] == f"Bearer {SECRET}"
        assert c.get(f"/ragstore/rags/{kb}", headers=c.a).json()["embeddingParameters"]["apiKey"] == "${vault:openai-key}"


def test_a_knowledge_base_whose_key_is_not_stored_is_saved_saying_so_with_its_fix(vaulted):
    """Never created silently broken: the save answers with the warning and the fix (EDDI clients, which may store
    the key after the configuration, still get their 201 and Location)."""
    c = vaulted
    body = {"name": "cloud", "embeddingProvider": "openai", "storeType": "sqlite",
            "embeddingParameters": {"apiKey": "${vault:openai-key}", "baseUrl": "https://api.openai.com/v1"}}
    r = c.post("/ragstore/rags", headers=c.a, json=body)
    assert r.status_code == 201 and r.headers["Location"]
    (warning,) = r.json()["warnings"]
    assert warning["check"] == "secrets" and "${vault:openai-key}" in warning["detail"]
    assert "PUT /secretstore/secrets/A/openai-key" in warning["fix"]
    c.put(f"{VAULT}/A/openai-key", headers=c.a, json={"value": SECRET})
    kb = r.headers["Location"].split("/")[-1].split("?")[0]
    again = c.put(f"/ragstore/rags/{kb}?version=1", headers=c.a, json={**body, "minScore": 0.5})
    assert again.status_code == 200 and again.json() == {"warnings": []}  # every reference resolves now
    assert c.post("/ragstore/rags", headers=c.a, json={"name": "offline", "embeddingProvider": "local", "storeType": "sqlite"}).json() == {"warnings": []}


def test_one_machine_with_no_master_key_keeps_one_in_its_data_directory(tmp_path, monkeypatch):
    """Issue 67, point 2: with the vault off, a literal secret was a 400, so a first pgvector knowledge base on one
    machine needed the operator to choose a master key first. With no key set and the state in the data directory's
    SQLite file, the runtime makes one there (owner-only), seals literals with it, and every process on the folder reads
    the same key; a key set by the operator is used instead, and no file is made."""
    import os
    import stat

    monkeypatch.delenv("EDDI_VAULT_MASTER_KEY", raising=False)
    kb = {"name": "Lager", "embeddingProvider": "local", "storeType": "pgvector",
          "storeParameters": {"host": "db.internal", "password": "Geheimnis-0123456789"}}
    with Runtime(tmp_path / "data") as first, Runtime(tmp_path / "data") as second:
        made = tmp_path / "data" / "vault-master.key"
        assert stat.S_IMODE(made.stat().st_mode) == 0o600 and len(made.read_text().strip()) >= 40
        assert first.vault.available and first.vault.key_file == made == second.vault.key_file
        saved = first.saving.create("rags", kb, tenant="A")
        stored = first.resources.read("rags", saved.id)["storeParameters"]["password"]
        assert stored.startswith("${vault:") and second.resolver.resolve(stored, "A") == "Geheimnis-0123456789"
    assert b"Geheimnis" not in b"".join(p.read_bytes() for p in (tmp_path / "data").iterdir() if p.is_file())
    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", MASTER)
    with Runtime(tmp_path / "operator's") as runtime:
        assert runtime.vault.available and runtime.vault.key_file is None
        assert not os.path.exists(tmp_path / "operator's" / "vault-master.key")
