"""EDDI's secrets vault, kept in the state database: a tenant's keys (an API key, a password) encrypted at rest and
never given back, only used where a configuration references them (``${vault:key}``, ``${eddivault:key}``).

Envelope encryption as EDDI does it (labsai/EDDI ``secrets/crypto/EnvelopeCrypto.java``), with ``cryptography``:

- the **master key** (``EDDI_VAULT_MASTER_KEY``, a passphrase) gives the key-encryption key (KEK): PBKDF2 with
  HMAC-SHA-256, 600,000 iterations, 32 bytes, over a random 16-byte salt made once per deployment (kept as
  ``vault-kek-salt``);
- each tenant has its own random 256-bit **data key** (DEK), stored encrypted by the KEK (AES-256-GCM over the DEK's
  base64, a fresh 12-byte IV);
- each **secret** is encrypted by its tenant's DEK (AES-256-GCM, a fresh IV each time), stored with a keyed
  ``checksum`` (``h1:`` HMAC-SHA-256 over tenant, NUL, value, under a random deployment key kept wrapped by the
  KEK: it cannot be brute-forced offline nor link equal values across tenants, and it is never returned), a
  description, the agents allowed to use it (``["*"]``: all) and its times;
- every ciphertext is **bound to its row** (GCM associated data: a secret to its tenant and name, a DEK to its
  tenant; ``a1:`` marks it), so a ciphertext moved onto another row does not open; older rows open without;
- a **KEK check** value tells a changed master key from the vault's own before a new DEK is wrapped under it:
  then rotate (``rotate_kek``) or, the old key lost, adopt the new one (``adopt_master_key``);
- a master key that is short, of low entropy or a well-known placeholder is refused at start
  (``weak_master_key``; ``EDDI_VAULT_ALLOW_WEAK_MASTER_KEY=true`` starts anyway, with a warning, to rotate away).

On one machine with its state in SQLite and no master key set, the runtime makes one in the data directory
(``local_master_key``: ``vault-master.key``, owner-only; ``serve`` says so at every start, with how to move it to the
operator's secret store); a fleet (state on PostgreSQL) needs the operator's. The KEK is derived at the vault's first
use, not at start (PBKDF2's 600,000 iterations: about 0.3 s a process).

Without a master key the vault is off: nothing can be stored (``VaultUnavailableError``, 503 with EDDI's words)
and ``${vault:…}`` falls back to ``EDDI_VAULT_<KEY>`` environment variables (``common.secrets``). A wrong master key
is found at the first DEK it cannot unwrap (``VaultKeyMismatchError``), never by returning garbage."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac
import json
import logging
import math
import os
import re
import secrets
import threading
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from eddi_rag import state
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

log = logging.getLogger(__name__)

MASTER_KEY_SETTING = "EDDI_VAULT_MASTER_KEY"
ALLOW_WEAK_SETTING = "EDDI_VAULT_ALLOW_WEAK_MASTER_KEY"
MIN_MASTER_KEY = 16  # characters (EDDI's VaultMasterKeyStrength)
MIN_MASTER_KEY_BITS = 3.0  # Shannon entropy per character
KNOWN_WEAK = {"changeme", "change-me", "changeit", "password", "secret", "masterkey", "master-key", "eddi", "demo", "test",
              "default", "letmein", "admin", "vault", "please-change-me", "my-secret-master-key"}
PBKDF2_ITERATIONS = 600_000
SALT_NAME = "vault-kek-salt"
CHECKSUM_KEY_NAME = "vault-checksum-key"  # the HMAC key of the checksums, wrapped by the KEK
KEK_CHECK_NAME = "vault-kek-check"  # a value only the vault's KEK opens
BOUND = "a1:"  # a ciphertext sealed with associated data naming its row
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


class GrantConflictError(EddiRagError):
    """A grant edit whose precondition (``expectedAllowedAgents``) no longer holds (HTTP 409, with the current grant)."""
    status = 409

    def __init__(self, message: str, current: list[str]):
        super().__init__(message)
        self.current = current

    def body(self) -> dict[str, Any]:
        return {"error": str(self), "allowedAgents": self.current}


class WeakMasterKeyError(EddiRagError, ValueError):
    """A master key the vault refuses to run with (HTTP 400 where a caller gave it)."""
    status = 400


def weak_master_key(key: str) -> str | None:
    """Why ``key`` is too weak to be the vault's master key (None: strong enough): shorter than MIN_MASTER_KEY, of
    low entropy (a repeated character, a short alphabet), or a well-known placeholder."""
    if len(key) < MIN_MASTER_KEY:
        return f"it has {len(key)} characters, fewer than {MIN_MASTER_KEY}"
    if re.sub(r"[^a-z]", "", key.lower()) in KNOWN_WEAK or key.lower() in KNOWN_WEAK:
        return "it is a well-known placeholder"
    counts = Counter(key)
    bits = -sum(n / len(key) * math.log2(n / len(key)) for n in counts.values())
    if bits < MIN_MASTER_KEY_BITS:
        return f"its characters carry {bits:.1f} bits each, fewer than {MIN_MASTER_KEY_BITS} (too repetitive)"
    return None


@dataclass
class SecretMetadata:
    """What may be known of a secret: never its value. EDDI's JSON field names."""
    tenantId: str
    keyName: str
    createdAt: str
    lastAccessedAt: str | None
    lastRotatedAt: str | None
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


LOCAL_KEY_FILE = "vault-master.key"


def local_master_key(data_dir: Path) -> tuple[str, Path] | None:
    """The master key kept in ``data_dir`` for one machine with no key set (made now, owner-only, when there is none),
    and its file; None when the folder cannot hold it (the vault stays off, logged)."""
    path = Path(data_dir) / LOCAL_KEY_FILE
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            made = path.with_name(f".{LOCAL_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
            fd = os.open(made, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_urlsafe(32) + "\n")
            try:
                os.link(made, path)  # whole or not at all; of two processes at once, one key wins and both read it
                log.warning("vault: made a master key for this machine in %s (owner-only). To keep it in your secret "
                            "store, set %s to its content and delete the file", path, MASTER_KEY_SETTING)
            except FileExistsError:
                pass
            finally:
                made.unlink()
        key = path.read_text().strip()
    except OSError as e:
        log.warning("vault: no master key set, and none can be kept in %s (%s): the vault is off", path, e)
        return None
    return (key, path) if key else None


@functools.lru_cache(maxsize=16)
def derive_kek(master_key: str, salt: bytes) -> bytes:
    """The KEK of ``master_key`` and the vault's ``salt`` (PBKDF2-SHA256, PBKDF2_ITERATIONS rounds: 0.13 s of CPU here),
    derived once a process for each pair: every runtime of a process on one vault shares it (a process holds the master
    key itself anyway)."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.pbkdf2 import PBKDF2HMAC

    return PBKDF2HMAC(algorithm=hashes.SHA256(), length=32, salt=salt, iterations=PBKDF2_ITERATIONS).derive(master_key.encode("utf-8"))


def encrypt(plaintext: str, key: bytes, row: str | None = None) -> tuple[str, str]:
    """(ciphertext, iv), both base64: AES-256-GCM with a fresh 12-byte IV, the 16-byte tag appended; ``row``: the
    associated data that binds it to its row (the ciphertext then starts with BOUND)."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    iv = os.urandom(12)
    sealed = _b64(AESGCM(key).encrypt(iv, plaintext.encode("utf-8"), row.encode("utf-8") if row is not None else None))
    return (BOUND + sealed if row is not None else sealed), _b64(iv)


def decrypt(ciphertext: str, iv: str, key: bytes, row: str | None = None) -> str:
    """The plaintext; a bound ciphertext opens only with its ``row`` (one written before binding, without)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    bound = ciphertext.startswith(BOUND)
    data = None if not bound or row is None else row.encode("utf-8")
    try:
        return AESGCM(key).decrypt(base64.b64decode(iv), base64.b64decode(ciphertext.removeprefix(BOUND)), data).decode("utf-8")
    except (InvalidTag, ValueError) as e:
        raise VaultKeyMismatchError("the vault's master key does not decrypt what is stored (it was encrypted under "
                                    f"another {MASTER_KEY_SETTING}, or the value was moved onto another row)") from e


def _secret_row(tenant: str, key: str) -> str:
    return f"secret|{tenant}|{key}"


def _dek_row(tenant: str) -> str:
    return f"dek|{tenant}"


def check_id(value: str, what: str) -> str:
    if not isinstance(value, str) or not VALID_ID.fullmatch(value):
        raise InvalidSecretError(f"{what} must match [a-zA-Z0-9._-]{{1,128}}, got {value!r}")
    return value


class SecretVault:
    """The vault on a state database; ``master_key``: the operator's passphrase (None: the vault is off). A weak
    one is refused (WeakMasterKeyError) unless ``allow_weak`` (EDDI_VAULT_ALLOW_WEAK_MASTER_KEY), which warns."""

    def __init__(self, db: StateDatabase, master_key: str | None = None, allow_weak: bool | None = None):
        self.db = db
        state.migrate(db)
        if master_key and (why := weak_master_key(master_key)):
            allowed = allow_weak if allow_weak is not None else \
                os.environ.get(ALLOW_WEAK_SETTING, "").strip().lower() in ("1", "true", "yes")
            if not allowed:
                raise WeakMasterKeyError(f"{MASTER_KEY_SETTING} is too weak to protect the vault: {why}. Choose a long random "
                                         f"passphrase (e.g. `openssl rand -base64 32`); a deployment already running on it "
                                         f"starts with {ALLOW_WEAK_SETTING}=true, rotates to a strong key "
                                         "(POST /secretstore/secrets/admin/rotate-kek), then removes the setting")
            log.warning("%s is weak (%s): started anyway (%s); rotate to a strong key", MASTER_KEY_SETTING, why, ALLOW_WEAK_SETTING)
        self._master_key = master_key or None
        self._derived: bytes | None = None  # the KEK, derived at the first use (``_kek``)
        self._deriving = threading.Lock()
        self._checksum_key: bytes | None = None

    @property
    def _kek(self) -> bytes | None:
        """The key-encryption key (None: the vault is off), derived from the master key at its first use; rows written
        before the keyed checksum are given it then."""
        if self._master_key is None:
            return None
        if self._derived is None:
            with self._deriving:
                if self._derived is None:
                    self._derived = derive_kek(self._master_key, self._salt())
                    try:
                        self._rekey_checksums()
                    except VaultKeyMismatchError as e:  # a changed master key: said at the first use that needs the old one
                        log.warning("vault: %s", e)
        return self._derived

    @_kek.setter
    def _kek(self, kek: bytes) -> None:
        self._derived = kek

    @property
    def available(self) -> bool:
        return self._master_key is not None

    def _require(self) -> bytes:
        if self._kek is None:
            raise VaultUnavailableError(f"the secrets vault is not configured: the {MASTER_KEY_SETTING} environment variable "
                                        f"is not set. Set it (a random passphrase of at least {MIN_MASTER_KEY} characters) "
                                        "and restart the server")
        return self._kek

    def _salt(self) -> bytes:
        self.db.execute("INSERT INTO vault_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                        (SALT_NAME, _b64(os.urandom(16))))  # made once; every process reads the one that won
        return base64.b64decode(self.db.query("SELECT value FROM vault_meta WHERE name=?", (SALT_NAME,))[0]["value"])

    def _meta(self, name: str) -> str | None:
        rows = self.db.query("SELECT value FROM vault_meta WHERE name=?", (name,))
        return rows[0]["value"] if rows else None

    def _wrapped(self, name: str, kek: bytes) -> bytes:
        """The random key kept (wrapped by ``kek``) under meta ``name``, made at its first use (the first writer wins)."""
        if self._meta(name) is None:
            ciphertext, iv = encrypt(_b64(os.urandom(32)), kek, name)
            self.db.execute("INSERT INTO vault_meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
                            (name, json.dumps([ciphertext, iv])))
        ciphertext, iv = json.loads(self._meta(name) or "[]")
        return base64.b64decode(decrypt(ciphertext, iv, kek, name))

    def _check_kek(self, kek: bytes) -> None:
        """Refuse to wrap anything new under a master key that is not the vault's (a changed EDDI_VAULT_MASTER_KEY, a
        replica left on a retired one). The first time, the key is the vault's when every stored DEK opens under it."""
        if self._meta(KEK_CHECK_NAME) is None:
            for r in self.db.query("SELECT tenant, encrypted_dek, iv FROM vault_deks"):
                decrypt(r["encrypted_dek"], r["iv"], kek, _dek_row(r["tenant"]))
            self._wrapped(KEK_CHECK_NAME, kek)
            return
        try:
            self._wrapped(KEK_CHECK_NAME, kek)
        except VaultKeyMismatchError:
            raise VaultKeyMismatchError(
                f"{MASTER_KEY_SETTING} is not the master key this vault was sealed with: nothing new is wrapped under it. "
                "Rotate to it with the old key (POST /secretstore/secrets/admin/rotate-kek), or, the old key lost, adopt "
                "it (POST /secretstore/secrets/admin/adopt-master-key?confirm=true) and reset the tenants it names") from None

    def checksum(self, tenant: str, value: str) -> str:
        """The keyed checksum of ``tenant``'s ``value`` (never returned to a caller)."""
        if self._checksum_key is None:
            kek = self._require()
            self._check_kek(kek)
            self._checksum_key = self._wrapped(CHECKSUM_KEY_NAME, kek)
        return "h1:" + hmac.new(self._checksum_key, f"{tenant}\0{value}".encode(), hashlib.sha256).hexdigest()

    def matches(self, tenant: str, key: str, value: str) -> bool:
        """Whether ``tenant``'s secret ``key`` holds ``value``, without a caller ever seeing a checksum."""
        expected = self.checksum(tenant, value)  # (first: the vault's first use rekeys the rows written before)
        rows = self.db.query("SELECT checksum FROM vault_secrets WHERE tenant=? AND key_name=?", (tenant, key))
        return bool(rows) and hmac.compare_digest(rows[0]["checksum"], expected)

    def _rekey_checksums(self) -> None:
        """Rows written before the keyed checksum (a bare SHA-256 of the value) get the keyed one."""
        old = [r for r in self.db.query("SELECT tenant, key_name, ciphertext, iv FROM vault_secrets WHERE checksum NOT LIKE 'h1:%'")]
        for r in old:
            dek = self._dek(r["tenant"], create=False)
            if dek is not None:
                value = decrypt(r["ciphertext"], r["iv"], dek, _secret_row(r["tenant"], r["key_name"]))
                self.db.execute("UPDATE vault_secrets SET checksum=? WHERE tenant=? AND key_name=?",
                                (self.checksum(r["tenant"], value), r["tenant"], r["key_name"]))

    def _dek(self, tenant: str, create: bool = True) -> bytes | None:
        kek = self._require()
        rows = self.db.query("SELECT encrypted_dek, iv FROM vault_deks WHERE tenant=?", (tenant,))
        if not rows and create:
            self._check_kek(kek)
            wrapped, iv = encrypt(_b64(os.urandom(32)), kek, _dek_row(tenant))
            self.db.execute("INSERT INTO vault_deks (tenant, encrypted_dek, iv, created_on) VALUES (?,?,?,?) "
                            "ON CONFLICT (tenant) DO NOTHING", (tenant, wrapped, iv, _now()))
            rows = self.db.query("SELECT encrypted_dek, iv FROM vault_deks WHERE tenant=?", (tenant,))
        return base64.b64decode(decrypt(rows[0]["encrypted_dek"], rows[0]["iv"], kek, _dek_row(tenant))) if rows else None

    @staticmethod
    def _metadata(row: Any) -> SecretMetadata:
        return SecretMetadata(row["tenant"], row["key_name"], row["created_on"], row["last_accessed_on"],
                              row["last_rotated_on"], row["description"], json.loads(row["allowed_agents"]))

    @staticmethod
    def _grant(allowed_agents: Any) -> list[str]:
        """A grant as stored: a non-empty list of agent ids, ``["*"]`` for every agent (a list naming "*" too)."""
        if not isinstance(allowed_agents, list) or not allowed_agents or \
                not all(isinstance(a, str) and a.strip() for a in allowed_agents):
            raise InvalidSecretError("allowedAgents must be a non-empty list of agent ids, or [\"*\"] for every agent")
        return ["*"] if "*" in allowed_agents else sorted(set(allowed_agents))

    def store(self, tenant: str, key: str, value: str, description: str | None = None,
              allowed_agents: list[str] | None = None) -> bool:
        """Store or replace ``tenant``'s secret ``key``; True when it is new. Replacing a value keeps the description
        and grant it had unless new ones are given (a rotation is not a grant edit)."""
        check_id(tenant, "tenantId")
        check_id(key, "keyName")
        if not isinstance(value, str) or not value.strip():
            raise InvalidSecretError("value: a secret's value must not be empty")
        if len(value) > MAX_VALUE_CHARS:
            raise InvalidSecretError(f"value: a secret's value may have at most {MAX_VALUE_CHARS:,} characters")
        grant = self._grant(allowed_agents) if allowed_agents is not None else None
        ciphertext, iv = encrypt(value, self._dek(tenant) or b"", _secret_row(tenant, key))
        checksum = self.checksum(tenant, value)
        now = _now()
        with self.db.transaction() as c:
            existing = c.execute("SELECT description, allowed_agents FROM vault_secrets WHERE tenant=? AND key_name=?",
                                 (tenant, key)).fetchall()
            if existing:
                c.execute("UPDATE vault_secrets SET ciphertext=?, iv=?, checksum=?, description=?, allowed_agents=?, "
                          "last_rotated_on=? WHERE tenant=? AND key_name=?",
                          (ciphertext, iv, checksum, existing[0]["description"] if description is None else description,
                           existing[0]["allowed_agents"] if grant is None else json.dumps(grant), now, tenant, key))
            else:
                c.execute("INSERT INTO vault_secrets (tenant, key_name, ciphertext, iv, checksum, description, allowed_agents, "
                          "created_on) VALUES (?,?,?,?,?,?,?,?)",
                          (tenant, key, ciphertext, iv, checksum, description, json.dumps(grant or ["*"]), now))
        return not existing

    def update_grant(self, tenant: str, key: str, allowed_agents: Any, description: str | None = None,
                     expected: list[str] | None = None) -> SecretMetadata:
        """Which agents may use ``tenant``'s secret ``key``, changed without its value (EDDI's ``PUT …/grant``);
        ``expected``: the grant the caller read, or GrantConflictError with the current one."""
        self._require()
        grant = self._grant(allowed_agents)
        with self.db.transaction() as c:
            rows = c.execute("SELECT allowed_agents FROM vault_secrets WHERE tenant=? AND key_name=?",
                             (check_id(tenant, "tenantId"), key)).fetchall()
            if not rows:
                raise SecretNotStoredError(f"tenant {tenant!r} has no secret {key!r} in the vault")
            current = json.loads(rows[0]["allowed_agents"])
            if expected is not None and set(expected) != set(current):
                raise GrantConflictError(f"the grant of {key!r} changed since it was read: it is now {current}", current)
            c.execute("UPDATE vault_secrets SET allowed_agents=?, description=COALESCE(?, description) "
                      "WHERE tenant=? AND key_name=?", (json.dumps(grant), description, tenant, key))
        return self.metadata(tenant, key)

    def granted(self, tenant: str, key: str, agent_id: str) -> bool:
        """Whether agent ``agent_id`` may use ``tenant``'s secret ``key`` (a secret not stored: nothing to refuse)."""
        rows = self.db.query("SELECT allowed_agents FROM vault_secrets WHERE tenant=? AND key_name=?", (tenant, key))
        if not rows:
            return True
        allowed = json.loads(rows[0]["allowed_agents"])
        return not allowed or "*" in allowed or agent_id in allowed

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
        plain = decrypt(rows[0]["ciphertext"], rows[0]["iv"], dek, _secret_row(tenant, key))
        self.db.execute("UPDATE vault_secrets SET last_accessed_on=? WHERE tenant=? AND key_name=?", (_now(), tenant, key))
        return plain

    def rotate_dek(self, tenant: str) -> int:
        """A new data key for ``tenant``, every secret re-encrypted with it (bound to its row) in one transaction;
        how many."""
        kek = self._require()
        old = self._dek(check_id(tenant, "tenantId"), create=False)
        if old is None:
            return 0
        self._check_kek(kek)
        new = os.urandom(32)
        wrapped, wrapped_iv = encrypt(_b64(new), kek, _dek_row(tenant))
        now = _now()
        with self.db.transaction() as c:
            rows = c.execute("SELECT key_name, ciphertext, iv FROM vault_secrets WHERE tenant=?", (tenant,)).fetchall()
            for r in rows:
                row = _secret_row(tenant, r["key_name"])
                ciphertext, iv = encrypt(decrypt(r["ciphertext"], r["iv"], old, row), new, row)
                c.execute("UPDATE vault_secrets SET ciphertext=?, iv=?, last_rotated_on=? WHERE tenant=? AND key_name=?",
                          (ciphertext, iv, now, tenant, r["key_name"]))
            c.execute("UPDATE vault_deks SET encrypted_dek=?, iv=?, rotated_on=? WHERE tenant=?", (wrapped, wrapped_iv, now, tenant))
        return len(rows)

    def rotate_kek(self, old_master_key: str, new_master_key: str) -> int:
        """Every tenant's data key, the checksum key and the KEK check re-wrapped under ``new_master_key`` (the old one
        must be the one in use; the new one strong enough); how many DEKs. The server uses the new key at once; the
        operator sets EDDI_VAULT_MASTER_KEY to it before the next start."""
        current = self._require()
        if not isinstance(new_master_key, str) or (why := weak_master_key(new_master_key)):
            raise WeakMasterKeyError(f"newMasterKey is too weak: {why or 'not a string'}")
        salt = self._salt()
        if derive_kek(old_master_key or "", salt) != current:
            raise VaultKeyMismatchError("oldMasterKey is not the master key the vault runs with")
        new = derive_kek(new_master_key, salt)
        with self.db.transaction() as c:
            rows = c.execute("SELECT tenant, encrypted_dek, iv FROM vault_deks").fetchall()
            for r in rows:
                row = _dek_row(r["tenant"])
                wrapped, iv = encrypt(decrypt(r["encrypted_dek"], r["iv"], current, row), new, row)
                c.execute("UPDATE vault_deks SET encrypted_dek=?, iv=?, rotated_on=? WHERE tenant=?", (wrapped, iv, _now(), r["tenant"]))
            for name in (CHECKSUM_KEY_NAME, KEK_CHECK_NAME):
                found = c.execute("SELECT value FROM vault_meta WHERE name=?", (name,)).fetchall()
                if found:
                    ciphertext, iv = json.loads(found[0]["value"])
                    c.execute("UPDATE vault_meta SET value=? WHERE name=?",
                              (json.dumps(encrypt(decrypt(ciphertext, iv, current, name), new, name)), name))
        self._kek = new
        derive_kek.cache_clear()  # (the old key, and every key tried, leave this process's memory)
        return len(rows)

    def adopt_master_key(self) -> dict[str, Any]:
        """The operator's decision after a lost master key: the configured one becomes the vault's (the KEK check and
        the checksum key are made anew under it); the tenants whose data key it cannot open are named, to reset."""
        kek = self._require()
        stranded = []
        for r in self.db.query("SELECT tenant, encrypted_dek, iv FROM vault_deks ORDER BY tenant"):
            try:
                decrypt(r["encrypted_dek"], r["iv"], kek, _dek_row(r["tenant"]))
            except VaultKeyMismatchError:
                stranded.append(r["tenant"])
        for name in (KEK_CHECK_NAME, CHECKSUM_KEY_NAME):
            try:
                self._wrapped(name, kek)
            except VaultKeyMismatchError:
                self.db.execute("DELETE FROM vault_meta WHERE name=?", (name,))
                self._wrapped(name, kek)
        self._checksum_key = None
        return {"adopted": True, "tenantsToReset": stranded,
                "message": "The configured master key is now the vault's." + (
                    f" {len(stranded)} tenant(s) hold data keys it cannot open: reset each (POST /secretstore/secrets/"
                    "{tenantId}/reset) and store their secrets again." if stranded else "")}

    def reset(self, tenant: str) -> int:
        """Every secret of ``tenant`` and its data key deleted (a lost master key); how many secrets."""
        self._require()
        with self.db.transaction() as c:
            n = c.execute("DELETE FROM vault_secrets WHERE tenant=?", (check_id(tenant, "tenantId"),)).rowcount
            c.execute("DELETE FROM vault_deks WHERE tenant=?", (tenant,))
        return n
