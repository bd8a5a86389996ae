"""What a tenant's administrators and editors keep once for every knowledge base: API keys (who may call;
admins), the group directory (which groups a user is in, for whose permissions a search reads with; admins) and
EDDI's global variables (``${vars:…}`` in parameters; editors). Each is the caller's tenant's
only: another tenant's key or variable does not exist for it."""

from __future__ import annotations

import builtins
import re
from collections.abc import Callable, Sequence
from typing import Any

from eddi_rag.auth import ForbiddenError, Principal
from eddi_rag.auth.keys import KeyInfo, KeyStore
from eddi_rag.records.grants import EDIT, VIEW, KbGrants
from eddi_rag.records.groups import GroupDirectory
from eddi_rag.resources.variables import VariableNotFoundError, Variables

VAULTED = re.compile(r"\$\{(?:eddi)?vault:")


Recorder = Callable[[str, str, str | None, dict[str, Any] | None], None]  # (tenant, action, subject, detail)


def _unrecorded(tenant: str, action: str, subject: str | None = None, detail: dict[str, Any] | None = None) -> None:
    pass


class Keys:
    def __init__(self, keys: KeyStore):
        self.keys = keys
        self.record: Recorder = _unrecorded  # the audit record (verbs.audit; given by the runtime)

    def create(self, tenant: str, role: str, user: str | None = None, name: str | None = None,
               acts_for_users: bool = False, groups: Sequence[str] = ()) -> tuple[KeyInfo, str]:
        """A new key of ``tenant``: (its info, the secret: shown once, never stored); ``groups``: the bound user's."""
        info, secret = self.keys.create(tenant, role, user, name, acts_for_users, groups)
        self.record(tenant, "key.created", f"key {info.id}", {"role": role, "user": user, "name": name,
                                                               "actsForUsers": acts_for_users, "groups": list(groups)})
        return info, secret

    def bound_to(self, tenant: str, user: str) -> bool:
        """Whether a key of ``tenant`` not revoked is bound to ``user``."""
        return any(k.user == user and not k.revokedOn for k in self.keys.list(tenant))

    def list(self, tenant: str | None) -> builtins.list[KeyInfo]:
        """``tenant``'s keys (None: every tenant's, for the operator's CLI)."""
        return self.keys.list(tenant)

    def revoke(self, key_id: str, tenant: str | None = None) -> KeyInfo:
        info = self.keys.revoke(key_id, tenant)
        self.record(info.tenant, "key.revoked", f"key {info.id}", {"role": info.role, "user": info.user})
        return info

    def any(self) -> bool:
        """Whether any key exists (the server then asks every caller for one)."""
        return self.keys.any()

    def authenticate(self, key: str) -> Principal:
        return self.keys.authenticate(key)


class Groups:
    """A tenant's group directory (records.groups): the groups of the users its agents' callers name."""

    def __init__(self, directory: GroupDirectory):
        self.directory = directory
        self.record: Recorder = _unrecorded  # the audit record (verbs.audit; given by the runtime)

    def of(self, tenant: str, user: str) -> builtins.list[str]:
        return self.directory.of(tenant, user)

    def set(self, tenant: str, user: str, groups: Sequence[str]) -> builtins.list[str]:
        """``user``'s groups in ``tenant`` are ``groups`` from now on: the next search reads with them."""
        before = self.directory.of(tenant, user)
        after = self.directory.set(tenant, user, groups)
        self.record(tenant, "groups.set", f"user:{user}", {"before": before, "after": after})
        return after

    def add(self, tenant: str, user: str, groups: Sequence[str]) -> builtins.list[str]:
        return self.directory.add(tenant, user, groups)

    def knows(self, tenant: str, user: str) -> bool:
        """Whether the directory names ``user`` (a group of theirs, set here or by a source's permission sync)."""
        return bool(self.directory.of(tenant, user))

    def memberships(self, tenant: str) -> builtins.list[dict[str, str]]:
        """Every membership of the tenant with its origin: the operator's, or a source's permission sync."""
        return self.directory.memberships(tenant)

    def remove(self, tenant: str, user: str, groups: Sequence[str]) -> builtins.list[str]:
        return self.directory.remove(tenant, user, groups)

    def members(self, tenant: str) -> dict[str, builtins.list[str]]:
        return self.directory.members(tenant)


class Grants:
    """Who may reach one knowledge base (records.grants): VIEW or EDIT per user or group, on top of tenant roles."""

    def __init__(self, grants: KbGrants, groups: GroupDirectory):
        self.grants, self.groups = grants, groups

    def of(self, tenant: str, kb_id: str) -> dict[str, str]:
        return self.grants.of(tenant, kb_id)

    def set(self, tenant: str, kb_id: str, grants: Sequence[dict[str, Any]]) -> dict[str, str]:
        return self.grants.set(tenant, kb_id, grants)

    def forget(self, kb_id: str) -> None:
        """A knowledge base deleted for good: its grants go (an id used again starts with none)."""
        self.grants.forget(kb_id)

    def may(self, caller: Principal, kb_id: str, need: str) -> bool:
        try:
            self.check(caller, kb_id, need)
        except ForbiddenError:
            return False
        return True

    def check(self, caller: Principal, kb_id: str, need: str) -> None:
        """ForbiddenError unless ``caller`` may ``need`` (VIEW or EDIT) the knowledge base: a knowledge base without
        grants is its tenant's (roles alone); with grants, a tenant administrator, the agent runtime's credential (VIEW:
        it reads for the users its knowledge bases' audience decides on), or a principal granted that (EDIT implies VIEW)."""
        granted = self.grants.of(caller.tenant, kb_id)
        if not granted or caller.allows("admin") or (caller.acts_for_users and need == VIEW):
            return
        held = {f"user:{caller.user_id}"} if caller.user_id else set()
        if caller.user_id:
            held |= {f"group:{g}" for g in (*caller.groups, *self.groups.of(caller.tenant, caller.user_id))}
        access = {granted[p] for p in held if p in granted}
        if EDIT in access or (need == VIEW and VIEW in access):
            return
        raise ForbiddenError(f"knowledge base {kb_id} is shared with named users and groups; this credential "
                             f"{'is not among them' if not access else 'may only view it'} (it needs {need})")


class GlobalVariables:
    def __init__(self, variables: Variables):
        self.variables = variables

    @staticmethod
    def _own(tenant: str, caller_tenant: str | None) -> None:
        if caller_tenant is not None and tenant != caller_tenant:
            raise VariableNotFoundError(f"no tenant {tenant!r}")

    def list(self, tenant: str, caller_tenant: str | None = None) -> builtins.list[dict[str, Any]]:
        """``tenant``'s variables, [{key, value, description, exportable}]; ``caller_tenant``: the caller's, which
        must be ``tenant``."""
        self._own(tenant, caller_tenant)
        return self.variables.list(tenant)

    def get(self, tenant: str, key: str, caller_tenant: str | None = None) -> dict[str, Any]:
        self._own(tenant, caller_tenant)
        return self.variables.get(tenant, key)

    def put(self, tenant: str, key: str, value: Any, description: Any = None, exportable: Any = True,
            caller_tenant: str | None = None, admin: bool = True) -> dict[str, Any]:
        """Create or update; knowledge bases read the new value the next time their configuration is read (a
        store or model is cached under its parameters with the values in: a new value builds a new one). A value
        holding a vault reference is an administrator's to write (``admin``), as in EDDI: an editor could
        otherwise point every configuration reading the variable at a secret it was never given."""
        self._own(tenant, caller_tenant)
        if not admin and isinstance(value, str) and VAULTED.search(value):
            raise ForbiddenError(f"variable {key!r}: a value holding a vault reference (${{vault:…}}) is written by an "
                                 "administrator of the tenant only")
        return self.variables.put(tenant, key, value, description, exportable)

    def delete(self, tenant: str, key: str, caller_tenant: str | None = None) -> None:
        self._own(tenant, caller_tenant)
        self.variables.delete(tenant, key)
