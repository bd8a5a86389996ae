"""API keys: ``erk_<id>_<secret>``; only a SHA-256 of the whole key is kept (the secret is 256
random bits, so a fast hash is what such keys need), compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.auth import AUDITOR, ROLES, AuthError, Principal
from eddi_rag.common.principals import not_an_id
from eddi_rag.errors import EddiRagError
from eddi_rag.state.sqlite import StateDatabase

PREFIX = "erk"


class KeyRequestError(EddiRagError, ValueError):
    """A key that cannot be created as asked (HTTP 400)."""
    status = 400


class KeyNotFoundError(EddiRagError, LookupError):
    status = 404
@dataclass
class KeyInfo:
    id: str
    tenant: str
    role: str
    user: str | None
    actsForUsers: bool
    name: str | None
    createdOn: str
    revokedOn: str | None
    groups: list[str] = field(default_factory=list)  # the bound user's groups (who may read what: retrieval.access)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class KeyStore:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def create(self, tenant: str, role: str, user: str | None = None, name: str | None = None,
               acts_for_users: bool = False, groups: Sequence[str] = ()) -> tuple[KeyInfo, str]:
        """A new key: (its info, the secret — shown once, never stored). ``groups``: the bound user's groups, which its
        searches read with (retrieval.access)."""
        if role not in (*ROLES, AUDITOR):
            raise KeyRequestError(f"role {role!r} is not one of {', '.join((*ROLES, AUDITOR))}")
        if not tenant or not tenant.strip():
            raise KeyRequestError("tenant is required")
        if acts_for_users and user:
            raise KeyRequestError("a key bound to a user cannot act for other users")
        groups = list(dict.fromkeys(groups))
        if groups and not user:
            raise KeyRequestError("groups: a key carries groups only for the user it is bound to; name the user too")
        if bad := next((g for g in groups if not_an_id(g)), None):
            raise KeyRequestError(f"groups: {bad!r} is not a group id (1 to 200 characters, no commas, no control "
                                  "characters, not starting with a space)")
        key_id = secrets.token_hex(6)
        secret = f"{PREFIX}_{key_id}_{secrets.token_urlsafe(32)}"
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.db.execute("INSERT INTO api_keys (id, tenant, role, user_id, acts_for_users, name, hash, created_on, groups) "
                        "VALUES (?,?,?,?,?,?,?,?,?)",
                        (key_id, tenant, role, user, int(acts_for_users), name, _hash(secret), now, json.dumps(groups)))
        return self.get(key_id), secret

    def get(self, key_id: str) -> KeyInfo:
        rows = self.db.query("SELECT * FROM api_keys WHERE id=?", (key_id,))
        if not rows:
            raise KeyNotFoundError(f"no key {key_id!r}")
        return self._info(rows[0])

    @staticmethod
    def _info(r) -> KeyInfo:
        return KeyInfo(r["id"], r["tenant"], r["role"], r["user_id"], bool(r["acts_for_users"]), r["name"],
                       r["created_on"], r["revoked_on"], json.loads(r["groups"] or "[]"))

    def list(self, tenant: str | None = None) -> list[KeyInfo]:
        rows = self.db.query("SELECT * FROM api_keys WHERE (? IS NULL OR tenant=?) ORDER BY created_on, id",
                             (tenant, tenant))
        return [self._info(r) for r in rows]

    def revoke(self, key_id: str, tenant: str | None = None) -> KeyInfo:
        info = self.get(key_id)
        if tenant is not None and info.tenant != tenant:
            raise KeyNotFoundError(f"no key {key_id!r}")
        now = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self.db.execute("UPDATE api_keys SET revoked_on=COALESCE(revoked_on, ?) WHERE id=?", (now, key_id))
        return self.get(key_id)

    def any(self) -> bool:
        return bool(self.db.query("SELECT 1 FROM api_keys LIMIT 1"))

    def authenticate(self, key: str) -> Principal:
        parts = key.split("_")
        if len(parts) < 3 or parts[0] != PREFIX:
            raise AuthError("not an eddi-rag API key")
        rows = self.db.query("SELECT * FROM api_keys WHERE id=?", (parts[1],))
        if not rows or not hmac.compare_digest(rows[0]["hash"], _hash(key)):
            raise AuthError("unknown API key")
        r = rows[0]
        if r["revoked_on"]:
            raise AuthError("this API key was revoked")
        return Principal(r["tenant"], r["role"], r["user_id"], bool(r["acts_for_users"]), f"key {r['id']}",
                         tuple(json.loads(r["groups"] or "[]")))
