"""EDDI's global variables: key-value pairs per tenant (``/variablestore/variables/{tenantId}/{key}``), read
by ``${vars:key}`` (the knowledge base's tenant) or ``${vars:tenant/key}`` in ``embeddingParameters`` and
``storeParameters`` when a configuration is used (labsai/EDDI ``configs/variables/GlobalVariableResolver.java``).
Unlike vault secrets they are plain, visible values. A reference to a variable that is not set stays as it is
and fails, naming the variable, when the store or model is built (and in ``doctor``); a configuration may not
name another tenant's variables (refused when saved)."""

from __future__ import annotations

import re
from datetime import datetime, timezone
from typing import Any

from eddi_rag import state
from eddi_rag.errors import CONFIGURATION, EddiRagError
from eddi_rag.state.sqlite import StateDatabase

VARS = re.compile(r"\$\{vars:(?:([A-Za-z0-9_.\-]+)/)?([A-Za-z0-9_.\-]+)\}")
KEY = re.compile(r"^[A-Za-z0-9_.\-]{1,200}$")


class VariableNotFoundError(EddiRagError, LookupError):
    status = 404
    failure = CONFIGURATION


class VariableError(EddiRagError, ValueError):
    status = 400


def references(value: Any) -> list[tuple[str | None, str]]:
    """The (tenant or None, key) of each ``${vars:…}`` in ``value`` (a string, or the values of a mapping)."""
    if isinstance(value, dict):
        return [ref for v in value.values() for ref in references(v)]
    return [(m.group(1), m.group(2)) for m in VARS.finditer(value)] if isinstance(value, str) else []


class Variables:
    def __init__(self, db: StateDatabase):
        self.db = db
        state.migrate(db)

    def list(self, tenant: str) -> list[dict[str, Any]]:
        rows = self.db.query("SELECT * FROM global_variables WHERE tenant=? ORDER BY key", (tenant,))
        return [{"key": r["key"], "value": r["value"], "description": r["description"], "exportable": bool(r["exportable"])}
                for r in rows]

    def get(self, tenant: str, key: str) -> dict[str, Any]:
        found = [v for v in self.list(tenant) if v["key"] == key]
        if not found:
            raise VariableNotFoundError(f"no global variable {key!r} in tenant {tenant!r}")
        return found[0]

    def put(self, tenant: str, key: str, value: Any, description: Any = None, exportable: Any = True) -> dict[str, Any]:
        if not KEY.match(key):
            raise VariableError(f"key {key!r}: letters, digits, '.', '_' and '-' only (1 to 200), as ${{vars:key}} reads it")
        if not isinstance(value, str):
            raise VariableError(f"value: a string, got {type(value).__name__}")
        if description is not None and not isinstance(description, str):
            raise VariableError("description: a string")
        self.db.execute("INSERT INTO global_variables VALUES (?,?,?,?,?,?) ON CONFLICT(tenant, key) DO UPDATE SET "
                        "value=excluded.value, description=excluded.description, exportable=excluded.exportable, "
                        "updated_at=excluded.updated_at",
                        (tenant, key, value, description, 0 if exportable is False else 1,
                         datetime.now(timezone.utc).isoformat(timespec="milliseconds")))
        return self.get(tenant, key)

    def delete(self, tenant: str, key: str) -> None:
        self.get(tenant, key)
        self.db.execute("DELETE FROM global_variables WHERE tenant=? AND key=?", (tenant, key))

    def substitute(self, params: dict[str, Any], tenant: str) -> dict[str, Any]:
        """``params`` with each ``${vars:…}`` of ``tenant`` replaced by its value (unknown ones, and another
        tenant's, stay as they are)."""
        if not references(params):
            return params
        values = {v["key"]: v["value"] for v in self.list(tenant)}

        def one(m: re.Match[str]) -> str:
            named, key = m.group(1), m.group(2)
            return values.get(key, m.group(0)) if named in (None, tenant) else m.group(0)

        return {k: VARS.sub(one, v) if isinstance(v, str) else v for k, v in params.items()}
