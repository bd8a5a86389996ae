"""EDDI's secrets vault as its REST API offers it (``/secretstore/secrets``, ``records.vault``): a tenant stores,
replaces, lists (metadata only) and deletes its keys, rotates its data key or resets its vault; the operator
rotates the master key. Each tenant sees its own vault only: another tenant's is a vault that does not exist."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from pathlib import Path
from typing import Any

from eddi_rag.records.vault import (
    InvalidSecretError,
    SecretNotStoredError,
    SecretVault,
    VaultUnavailableError,
    check_id,
    reference,
)
from eddi_rag.resource_types import DEFAULT_TENANT

__all__ = ["Vault", "VaultUnavailableError"]


class Vault:
    def __init__(self, vault: SecretVault, key_file: Path | None = None):
        """``key_file``: the master key kept in the data directory (one machine, none set: records.vault.local_master_key)."""
        self.vault, self.key_file = vault, key_file
        self.record: Callable[..., None] = lambda *entry: None  # the audit record (verbs.audit; given by the runtime)

    @staticmethod
    def _own(tenant: str, caller_tenant: str | None) -> str:
        check_id(tenant, "tenantId")
        if caller_tenant is not None and tenant != caller_tenant:
            raise SecretNotStoredError(f"no tenant {tenant!r}")
        return tenant

    @property
    def available(self) -> bool:
        return self.vault.available

    def health(self) -> dict[str, Any]:
        """EDDI's vault health: {status UP/DOWN, provider, available}."""
        return {"status": "UP" if self.available else "DOWN", "provider": "VaultSecretProvider", "available": self.available}

    def store(self, tenant: str, key: str, value: str, description: str | None = None,
              allowed_agents: builtins.list[str] | None = None, caller_tenant: str | None = None) -> tuple[bool, dict[str, Any]]:
        """Store or replace; (whether it is new, {reference, tenantId, keyName}): the reference a configuration uses."""
        created = self.vault.store(self._own(tenant, caller_tenant), key, value, description, allowed_agents)
        self.record(tenant, "vault.stored", f"secret {key}", {"created": created, "allowedAgents": allowed_agents})  # (never the value)
        return created, {"reference": reference(tenant, key), "tenantId": tenant, "keyName": key}

    def metadata(self, tenant: str, key: str, caller_tenant: str | None = None) -> dict[str, Any]:
        return vars(self.vault.metadata(self._own(tenant, caller_tenant), key))

    def list(self, tenant: str, caller_tenant: str | None = None) -> builtins.list[dict[str, Any]]:
        return [vars(m) for m in self.vault.list(self._own(tenant, caller_tenant))]

    def update_grant(self, tenant: str, key: str, allowed_agents: Any, description: str | None = None,
                     expected: builtins.list[str] | None = None, caller_tenant: str | None = None) -> dict[str, Any]:
        """Which agents may use the secret, changed without its value; ``expected``: the grant the caller read (409
        with the current one when it changed since)."""
        granted = vars(self.vault.update_grant(self._own(tenant, caller_tenant), key, allowed_agents, description, expected))
        self.record(tenant, "vault.granted", f"secret {key}", {"allowedAgents": granted.get("allowedAgents")})
        return granted

    def adopt_master_key(self, confirm: bool, caller_tenant: str | None = None) -> dict[str, Any]:
        """After a lost master key, the configured one becomes the vault's (the operator's explicit act)."""
        if caller_tenant is not None and caller_tenant != DEFAULT_TENANT:
            raise SecretNotStoredError("the master key is the operator's: adopt it as an administrator of the default tenant")
        if not confirm:
            raise InvalidSecretError("confirm: adopting the configured master key gives up the data keys it cannot open; "
                                     "send confirm=true to do it")
        return self.vault.adopt_master_key()

    def delete(self, tenant: str, key: str, caller_tenant: str | None = None) -> None:
        self.vault.delete(self._own(tenant, caller_tenant), key)
        self.record(tenant, "vault.deleted", f"secret {key}", {})

    def rotate_dek(self, tenant: str, caller_tenant: str | None = None) -> dict[str, Any]:
        n = self.vault.rotate_dek(self._own(tenant, caller_tenant))
        self.record(tenant, "vault.rotated", "data key", {"secretsReEncrypted": n})
        return {"tenantId": tenant, "secretsReEncrypted": n, "message": f"DEK rotated successfully. {n} secrets re-encrypted."}

    def reset(self, tenant: str, caller_tenant: str | None = None) -> dict[str, Any]:
        n = self.vault.reset(self._own(tenant, caller_tenant))
        self.record(tenant, "vault.reset", "vault", {"secretsDeleted": n})
        return {"tenantId": tenant, "secretsDeleted": n,
                "message": f"Vault reset for tenant '{tenant}'. {n} secret(s) deleted, DEK removed. The next secret store "
                           "operation will generate a fresh DEK with the current master key."}

    def rotate_kek(self, old_master_key: str, new_master_key: str, caller_tenant: str | None = None) -> dict[str, Any]:
        """Every tenant's data key re-wrapped: the operator's (the default tenant's administrators') act."""
        if caller_tenant is not None and caller_tenant != DEFAULT_TENANT:
            raise SecretNotStoredError("the master key is the operator's: rotate it as an administrator of the default tenant")
        n = self.vault.rotate_kek(old_master_key, new_master_key)
        self.record(DEFAULT_TENANT, "vault.rotated", "master key", {"deksReEncrypted": n})  # (never a key)
        return {"deksReEncrypted": n, "message": f"KEK rotated successfully. {n} DEKs re-encrypted. IMPORTANT: Update the "
                                                 "EDDI_VAULT_MASTER_KEY environment variable to the new key and restart."}
