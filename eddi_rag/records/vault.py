"""EDDI's secrets vault, kept in the state database: a tenant's keys (an API key, a password) encrypted at rest and
never given back, only used where a configuration references them (``${vault:key}``, ``${eddivault:key}``).

Envelope encryption as EDDI does it (labsai/EDDI ``secrets/crypto/EnvelopeCrypto.java``), with ``cryptography``:

- the **master key** (``EDDI_VAULT_MASTER_KEY``, a passphrase) gives the key-encryption key (KEK): PBKDF2 with
  HMAC-SHA-256, 600,000 iterations, 32 bytes, over a random 16-byte salt made once per deployment (kept as
  ``vault-kek-salt``);
- each tenant has its own random 256-bit **data key** (DEK), stored encrypted by the KEK (AES-256-GCM over the DEK's
  base64, a fresh 12-byte IV);
- each **secret** is encrypted by its tenant's DEK (AES-256-GCM, a fresh IV each time), stored with its SHA-256
  ``checksum`` (EDDI's: a key stored twice can be recognised without decrypting), a description, the agents
  allowed to use it (``["*"]``: all) and its times.

Without a master key the vault is off: nothing can be stored (``VaultUnavailableError``, 503 with EDDI's words)
and ``${vault:…}`` falls back to ``EDDI_VAULT_<KEY>`` environment variables (``common.secrets``). A wrong master key
is found at the first DEK it cannot unwrap (``VaultKeyMismatchError``), never by returning garbage."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

MASTER_KEY_SETTING = "EDDI_VAULT_MASTER_KEY"
MIN_MASTER_KEY = 8  # characters, as EDDI asks of a new master key
PBKDF2_ITERATIONS = 600_000
SALT_NAME = "vault-kek-salt"
VALID_ID = re.compile(r"[a-zA-Z0-9._\-]{1,128}")  # a tenant id or key name, as EDDI allows them
MAX_VALUE_CHARS = 65_536


class VaultUnavailableError(EddiRagError):
    """No master key: the vault cannot store or read anything (HTTP 503)."""
    status = 503


class SecretNotStoredError(EddiRagError, LookupError):
    """The tenant has no secret of that name (HTTP 404)."""
    status = 404


class InvalidSecretError(EddiRagError, ValueError):
    """A tenant id, key name or value the vault does not take (HTTP 400); the message names which."""
    status = 400


class VaultKeyMismatchError(EddiRagError):
    """The master key given does not unwrap the stored data keys (HTTP 409: another key encrypted them)."""
    status = 409


@dataclass
class SecretMetadata:
    """What may be known of a secret: never its value. EDDI's JSON field names."""
    tenantId: str
    keyName: str
    createdAt: str
    lastAccessedAt: str | None
    lastRotatedAt: str | None
    checksum: str
    description: str | None
    allowedAgents: list[str]

    def reference(self) -> str:
        return reference(self.tenantId, self.keyName)


def reference(tenant: str, key: str) -> str:
    """How a configuration names a secret: ``${vault:key}`` in the default tenant, else ``${vault:tenant/key}``."""
    return f"${{vault:{key}}}" if tenant == "default" else f"${{vault:{tenant}/{key}}}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def derive_kek(master_key: str, salt: bytes) -> bytes:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    return PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=PBKDF2_ITERATIONS).derive(master_key.encode("utf-8"))


def encrypt(plaintext: str, key: bytes) -> tuple[str, str]:
    """(ciphertext, iv), both base64: AES-256-GCM with a fresh 12-byte IV, the 16-byte tag appended."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    iv = os.urandom(12)
    return _b64(AESGCM(key).encrypt(iv, plaintext.encode("utf-8"), None)), _b64(iv)


def decrypt(ciphertext: str, iv: str, key: bytes) -> str:
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    try:
        return AESGCM(key).decrypt(base64.b64decode(iv), base64.b64decode(ciphertext), None).decode("utf-8")
    except (InvalidTag, ValueError) as e:
        raise VaultKeyMismatchError("the vault's master key does not decrypt what is stored (it was encrypted under "
                                    f"another {MASTER_KEY_SETTING})") from e


def check_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not VALID_ID.fullmatch(value):
        raise InvalidSecretError(f"{what} must match [a-zA-Z0-9._-]{{1,128}}, got {value!r}")
    return value


class SecretVault:
    """The vault on a state database; ``master_key``: the operator's passphrase (None: the vault is off)."""

    def __init__(self, db: StateDatabase, master_key: str | None = None):
        self.db = db
        state.migrate(db)
        self._kek = derive_kek(master_key, self._salt()) if master_key else None

    @property
    def available(self) -> bool:
        return self._kek is not None

    def _require(self) -> bytes:
        if self._kek is None:
            raise VaultUnavailableError(f"the secrets vault is not configured: the {MASTER_KEY_SETTING} environment variable "
                                        "is not set. Set it (a passphrase of at least 8 characters) and restart the server")
        return self._kek

    def _salt(self) -> bytes:
        self.db.execute("INSERT INTO vault_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                        (SALT_NAME, _b64(os.urandom(16))))  # made once; every process reads the one that won
        return base64.b64decode(self.db.query("SELECT value FROM vault_meta WHERE name=?", (SALT_NAME,))[0]["value"])

    def _dek(self, tenant: str, create: bool = True) -> bytes | None:
        kek = self._require()
        rows = self.db.query("SELECT encrypted_dek, iv FROM vault_deks WHERE tenant=?", (tenant,))
        if not rows and create:
            wrapped, iv = encrypt(_b64(os.urandom(32)), kek)
            self.db.execute("INSERT INTO vault_deks (tenant, encrypted_dek, iv, created_on) VALUES (?,?,?,?) "
                            "ON CONFLICT (tenant) DO NOTHING", (tenant, wrapped, iv, _now()))
            rows = self.db.query("SELECT encrypted_dek, iv FROM vault_deks WHERE tenant=?", (tenant,))
        return base64.b64decode(decrypt(rows[0]["encrypted_dek"], rows[0]["iv"], kek)) if rows else None

    @staticmethod
    def _metadata(row: Any) -> SecretMetadata:
        return SecretMetadata(row["tenant"], row["key_name"], row["created_on"], row["last_accessed_on"],
                              row["last_rotated_on"], row["checksum"], row["description"], json.loads(row["allowed_agents"]))

    def store(self, tenant: str, key: str, value: str, description: str | None = None,
              allowed_agents: list[str] | None = None) -> bool:
        """Store or replace ``tenant``'s secret ``key``; True when it is new."""
        check_id(tenant, "tenantId")
        check_id(key, "keyName")
        if not isinstance(value, str) or not value.strip():
            raise InvalidSecretError("value: a secret's value must not be empty")
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidSecretError(f"value: a secret's value may have at most {MAX_VALUE_CHARS:,} characters")
        if allowed_agents is not None and not all(isinstance(a, str) and a for a in allowed_agents):
            raise InvalidSecretError("allowedAgents must be a list of agent ids (or [\"*\"] for all)")
        ciphertext, iv = encrypt(value, self._dek(tenant) or b"")
        checksum = hashlib.sha256(value.encode("utf-8")).hexdigest()
        now = _now()
        with self.db.transaction() as c:
            existing = c.execute("SELECT created_on FROM vault_secrets WHERE tenant=? AND key_name=?", (tenant, key)).fetchall()
            if existing:
                c.execute("UPDATE vault_secrets SET ciphertext=?, iv=?, checksum=?, description=?, allowed_agents=?, "
                          "last_rotated_on=? WHERE tenant=? AND key_name=?",
                          (ciphertext, iv, checksum, description, json.dumps(allowed_agents or ["*"]), now, tenant, key))
            else:
                c.execute("INSERT INTO vault_secrets (tenant, key_name, ciphertext, iv, checksum, description, allowed_agents, "
                          "created_on) VALUES (?,?,?,?,?,?,?,?)",
                          (tenant, key, ciphertext, iv, checksum, description, json.dumps(allowed_agents or ["*"]), now))
        return not existing

    def metadata(self, tenant: str, key: str) -> SecretMetadata:
        self._require()
        rows = self.db.query("SELECT * FROM vault_secrets WHERE tenant=? AND key_name=?", (check_id(tenant, "tenantId"), key))
        if not rows:
            raise SecretNotStoredError(f"tenant {tenant!r} has no secret {key!r} in the vault")
        return self._metadata(rows[0])

    def list(self, tenant: str) -> list[SecretMetadata]:
        self._require()
        rows = self.db.query("SELECT * FROM vault_secrets WHERE tenant=? ORDER BY key_name", (check_id(tenant, "tenantId"),))
        return [self._metadata(r) for r in rows]

    def delete(self, tenant: str, key: str) -> None:
        self._require()
        if not self.db.execute("DELETE FROM vault_secrets WHERE tenant=? AND key_name=?", (tenant, key)).rowcount:
            raise SecretNotStoredError(f"tenant {tenant!r} has no secret {key!r} in the vault")

    def value(self, tenant: str, key: str) -> str | None:
        """The plaintext of ``tenant``'s secret ``key`` (None when it is not stored, or the vault is off); for the
        resolver only, never for a caller."""
        if self._kek is None:
            return None
        rows = self.db.query("SELECT ciphertext, iv FROM vault_secrets WHERE tenant=? AND key_name=?", (tenant, key))
        if not rows:
            return None
        dek = self._dek(tenant, create=False)
        if dek is None:
            return None
        plain = decrypt(rows[0]["ciphertext"], rows[0]["iv"], dek)
        self.db.execute("UPDATE vault_secrets SET last_accessed_on=? WHERE tenant=? AND key_name=?", (_now(), tenant, key))
        return plain

    def rotate_dek(self, tenant: str) -> int:
        """A new data key for ``tenant``, every secret re-encrypted with it in one transaction; how many."""
        kek = self._require()
        old = self._dek(check_id(tenant, "tenantId"), create=False)
        if old is None:
            return 0
        new = os.urandom(32)
        wrapped, wrapped_iv = encrypt(_b64(new), kek)
        now = _now()
        with self.db.transaction() as c:
            rows = c.execute("SELECT key_name, ciphertext, iv FROM vault_secrets WHERE tenant=?", (tenant,)).fetchall()
            for r in rows:
                ciphertext, iv = encrypt(decrypt(r["ciphertext"], r["iv"], old), new)
                c.execute("UPDATE vault_secrets SET ciphertext=?, iv=?, last_rotated_on=? WHERE tenant=? AND key_name=?",
                          (ciphertext, iv, now, tenant, r["key_name"]))
            c.execute("UPDATE vault_deks SET encrypted_dek=?, iv=?, rotated_on=? WHERE tenant=?", (wrapped, wrapped_iv, now, tenant))
        return len(rows)

    def rotate_kek(self, old_master_key: str, new_master_key: str) -> int:
        """Every tenant's data key re-wrapped under ``new_master_key`` (the old one must be the one in use); how many.
        The server uses the new key at once; the operator sets EDDI_VAULT_MASTER_KEY to it before the next start."""
        current = self._require()
        if not isinstance(new_master_key, str) or len(new_master_key) < MIN_MASTER_KEY:
            raise InvalidSecretError(f"newMasterKey must have at least {MIN_MASTER_KEY} characters")
        salt = self._salt()
        if derive_kek(old_master_key or "", salt) != current:
            raise VaultKeyMismatchError("oldMasterKey is not the master key the vault runs with")
        new = derive_kek(new_master_key, salt)
        with self.db.transaction() as c:
            rows = c.execute("SELECT tenant, encrypted_dek, iv FROM vault_deks").fetchall()
            for r in rows:
                wrapped, iv = encrypt(decrypt(r["encrypted_dek"], r["iv"], current), new)
                c.execute("UPDATE vault_deks SET encrypted_dek=?, iv=?, rotated_on=? WHERE tenant=?", (wrapped, iv, _now(), r["tenant"]))
        self._kek = new
        return len(rows)

    def reset(self, tenant: str) -> int:
        """Every secret of ``tenant`` and its data key deleted (a lost master key); how many secrets."""
        self._require()
        with self.db.transaction() as c:
            n = c.execute("DELETE FROM vault_secrets WHERE tenant=?", (check_id(tenant, "tenantId"),)).rowcount
            c.execute("DELETE FROM vault_deks WHERE tenant=?", (tenant,))
        return n
