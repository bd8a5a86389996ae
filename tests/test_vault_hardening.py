"""The vault as EDDI hardened it on 2026-09-26 (issue 42, point 6; labsai/EDDI docs/changelog.d/2026-09-26-security-
secrets-crypto.md and -fix-vault-key-safety.md): no checksum over REST and none an offline dictionary can reverse,
ciphertexts bound to their row, a rotation that keeps the grant, a grant edited with a precondition, a changed master
key adopted only by the operator's explicit act, a strength gate on the master key, a variable holding a vault
reference written by administrators only, and ``allowedAgents`` enforced in an agent's turn."""

from __future__ import annotations

import hashlib

import pytest
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.records.vault import SecretVault, VaultKeyMismatchError, WeakMasterKeyError
from eddi_rag.resource_types import resource_uri
from eddi_rag.runtime import Runtime
from eddi_rag.workflow.memory import ConversationMemory
from tests import test_vault
from tests.test_vault import MASTER, VAULT

vaulted = test_vault.vaulted  # the fixture: a runtime with a vault, admins, editors and viewers of A, the operator

PIN = "4711"


def test_the_checksum_is_keyed_bound_to_the_tenant_and_never_returned(vaulted):
    """An editor recovered a 4-digit secret from the metadata's checksum (sha256) by trying 10,000 values."""
    c = vaulted
    c.put(f"{VAULT}/A/pin", headers=c.a_editor, json={"value": PIN})
    c.put(f"{VAULT}/default/pin", headers=c.operator, json={"value": PIN})
    assert "checksum" not in c.get(f"{VAULT}/A/pin", headers=c.a_editor).json()
    assert all("checksum" not in m for m in c.get(f"{VAULT}/A", headers=c.a_editor).json())
    rows = {r["tenant"]: r["checksum"] for r in c.runtime.db.query("SELECT tenant, checksum FROM vault_secrets")}
    assert rows["A"].startswith("h1:") and rows["A"] != rows["default"]  # equal values are not linkable across tenants
    assert hashlib.sha256(PIN.encode()).hexdigest() not in rows.values()
    assert not any(hashlib.sha256(f"{n:04d}".encode()).hexdigest() in rows["A"] for n in range(10_000))
    vault = c.runtime.vault.vault
    assert vault.matches("A", "pin", PIN) and not vault.matches("A", "pin", "4712")


def test_a_checksum_written_before_is_rekeyed_and_the_key_survives_a_master_key_rotation(tmp_path):
    from eddi_rag.state.sqlite import Database

    db = Database(tmp_path / "state.db")
    vault = SecretVault(db, MASTER)
    vault.store("A", "pin", PIN)
    db.execute("UPDATE vault_secrets SET checksum=?", (hashlib.sha256(PIN.encode()).hexdigest(),))  # as stored before
    again = SecretVault(db, MASTER)
    assert again.matches("A", "pin", PIN)  # (rekeyed at the vault's first use: its key is derived then, issue 67)
    (row,) = db.query("SELECT checksum FROM vault_secrets")
    assert row["checksum"].startswith("h1:")
    again.rotate_kek(MASTER, "another master passphrase, rotated")
    assert again.matches("A", "pin", PIN) and SecretVault(db, "another master passphrase, rotated").matches("A", "pin", PIN)


def test_a_ciphertext_moved_onto_another_row_does_not_open(vaulted):
    c = vaulted
    for key, value in (("openai", "sk-openai-0123456789"), ("cohere", "co-0123456789abcdef")):
        c.put(f"{VAULT}/A/{key}", headers=c.a_editor, json={"value": value})
    db = c.runtime.db
    (moved,) = db.query("SELECT ciphertext, iv FROM vault_secrets WHERE key_name='openai'")
    db.execute("UPDATE vault_secrets SET ciphertext=?, iv=? WHERE key_name='cohere'", (moved["ciphertext"], moved["iv"]))
    with pytest.raises(VaultKeyMismatchError):
        c.runtime.resolver.resolve("${vault:cohere}", "A")
    assert c.runtime.resolver.resolve("${vault:openai}", "A") == "sk-openai-0123456789"


def test_a_rotation_keeps_description_and_grant_and_a_grant_is_edited_with_a_precondition(vaulted):
    c = vaulted
    c.put(f"{VAULT}/A/k", headers=c.a_editor, json={"value": "v1-0123456789", "description": "prod", "allowedAgents": ["a1"]})
    c.put(f"{VAULT}/A/k", headers=c.a_editor, json={"value": "v2-0123456789"})  # a rotation: the value alone
    meta = c.get(f"{VAULT}/A/k", headers=c.a_editor).json()
    assert (meta["description"], meta["allowedAgents"]) == ("prod", ["a1"])

    grant = f"{VAULT}/A/k/grant"
    assert c.put(grant, headers=c.a_editor, json={"allowedAgents": ["a1", "a2"]}).status_code == 403  # an administrator's
    assert c.put(grant, headers=c.a, json={"allowedAgents": []}).status_code == 400  # "nobody" is not "everyone"
    stale = c.put(grant, headers=c.a, json={"allowedAgents": ["a2"], "expectedAllowedAgents": ["a9"]})
    assert stale.status_code == 409 and stale.json()["allowedAgents"] == ["a1"]
    done = c.put(grant, headers=c.a, json={"allowedAgents": ["a1", "a2"], "expectedAllowedAgents": ["a1"]})
    assert done.status_code == 200 and done.json()["allowedAgents"] == ["a1", "a2"]
    assert c.runtime.resolver.resolve("${vault:k}", "A") == "v2-0123456789"  # the value untouched
    assert c.put(f"{VAULT}/A/none/grant", headers=c.a, json={"allowedAgents": ["*"]}).status_code == 404


def test_a_changed_master_key_wraps_nothing_until_the_operator_adopts_it(tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", MASTER)
    with Runtime(tmp_path) as runtime:
        runtime.vault.store("A", "k", "v-0123456789")
    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "a new master passphrase, the old one lost")
    with Runtime(tmp_path) as runtime, TestClient(create_app(runtime), raise_server_exceptions=False) as c:
        operator = {"Authorization": f"Bearer {runtime.keys.create('default', 'admin')[1]}"}
        refused = c.put(f"{VAULT}/default/k", headers=operator, json={"value": "v"})
        assert refused.status_code == 409 and "adopt-master-key" in refused.json()["error"]
        assert c.post(f"{VAULT}/admin/adopt-master-key", headers=operator).status_code == 400  # confirm=true, said
        adopted = c.post(f"{VAULT}/admin/adopt-master-key", headers=operator, params={"confirm": "true"})
        assert adopted.status_code == 200 and adopted.json()["tenantsToReset"] == ["A"]
        assert c.put(f"{VAULT}/default/k", headers=operator, json={"value": "v-0123456789"}).status_code == 201
        assert c.post(f"{VAULT}/A/reset", headers=operator).status_code == 404  # (A's own administrators reset A)


def test_a_weak_master_key_is_refused_at_start_unless_the_operator_says_so(tmp_path, monkeypatch):
    for weak in ("short", "y" * 24, "changeme"):
        monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", weak)
        with pytest.raises(WeakMasterKeyError, match="EDDI_VAULT_ALLOW_WEAK_MASTER_KEY"):
            Runtime(tmp_path / weak[:5])
    monkeypatch.setenv("EDDI_VAULT_ALLOW_WEAK_MASTER_KEY", "true")  # a deployment on one starts, to rotate away
    with Runtime(tmp_path / "allowed") as runtime:
        assert runtime.vault.available


def test_a_variable_holding_a_vault_reference_is_written_by_an_administrator(vaulted):
    c = vaulted
    url = "/variablestore/variables/A/model-key"
    assert c.put(url, headers=c.a_editor, json={"value": "${vault:k}"}).status_code == 403
    assert c.put(url, headers=c.a_editor, json={"value": "text-embedding-3-small"}).status_code == 200
    assert c.put(url, headers=c.a, json={"value": "${vault:k}"}).status_code == 200


def test_allowed_agents_is_enforced_in_an_agents_turn(vaulted):
    """``allowedAgents`` was stored and shown, and any agent's turn used the secret."""
    runtime = vaulted.runtime
    runtime.vault.store("default", "docs-key", "k-0123456789", allowed_agents=["granted"])
    kb = runtime.resources.create("rags", {"name": "Docs", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0,
                                           "storeParameters": {"path": "docs.db", "note": "${vault:docs-key}"}}).id
    runtime.ingest(kb, "a.md", "The night train leaves at 22:10.")
    workflow = runtime.resources.create("workflows", {"workflowSteps": [
        {"type": "eddi://ai.labs.rag", "config": {"uri": resource_uri("rags", kb, 1)}}]}).uri
    llm = runtime.resources.create("llm", {"tasks": [{"id": "t", "type": "openai", "enableWorkflowRag": True,
                                                      "parameters": {"systemMessage": "Be brief."}}]}).uri
    runtime.resources.update("workflows", workflow.split("/")[-1].split("?")[0], 1, {"workflowSteps": [
        {"type": "eddi://ai.labs.rag", "config": {"uri": resource_uri("rags", kb, 1)}},
        {"type": "eddi://ai.labs.llm", "config": {"uri": llm}}]})
    wf = workflow.split("/")[-1].split("?")[0]
    for agent in ("granted", "other"):
        runtime.resources.create("agents", {"workflows": [resource_uri("workflows", wf, 2)]}, id=agent)
    ok = runtime.turns.run(ConversationMemory(agent_id="granted", user_input="When does the night train leave?"))
    assert "22:10" in ok.system_message
    memory = ConversationMemory(agent_id="other", user_input="When does the night train leave?")
    refused = runtime.turns.run(memory)
    assert "22:10" not in refused.system_message
    (entry,) = memory.data["rag:trace:t"]
    assert "not granted vault secret(s) ${vault:docs-key}" in entry["error"] and "/grant" in entry["error"]
