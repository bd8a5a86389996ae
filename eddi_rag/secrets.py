"""Secret references: ``${env:NAME}`` and ``${eddivault:KEY}`` (or ``${vault:KEY}``, the spelling EDDI
writes since v6).

References stay unresolved everywhere (stored configs, descriptors, API responses, traces,
cache keys). They are resolved only by :func:`resolve_parameters`, called when a provider or
store is built, and the resolved values are never logged.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping
from typing import Any

from eddi_rag.errors import EddiRagError

REFERENCE = re.compile(r"\$\{(env|eddivault|vault|vars):([^}]+)\}")  # vars: replaced before (eddi_rag.variables)


class SecretNotFoundError(EddiRagError, LookupError):
    """A reference names a secret that is not available. The message names only the reference."""
    status = 409


class SecretResolver:
    """Resolves references. The vault is a plain mapping; by default it is read from
    ``EDDI_VAULT_<KEY>`` environment variables (KEY upper-cased, non-alphanumerics as ``_``)."""

    def __init__(self, vault: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None):
        self._vault = vault
        self._environ = environ if environ is not None else os.environ
        self._resolved: set[str] = set()  # secret values handed out, so redact() can hide them

    def _vault_value(self, key: str) -> str | None:
        if self._vault is not None:
            return self._vault.get(key)
        return self._environ.get("EDDI_VAULT_" + re.sub(r"[^A-Za-z0-9]", "_", key).upper())

    def resolve(self, value: Any) -> Any:
        if not isinstance(value, str) or "${" not in value:
            return value

        def substitute(m: re.Match[str]) -> str:
            kind, key = m.group(1), m.group(2).strip()
            if kind == "vars":  # a global variable that is not set (set ones were replaced when the config was read)
                raise SecretNotFoundError(f"global variable {m.group(0)} is not set (PUT /variablestore/variables/"
                                          f"<tenant>/{key.rsplit('/', 1)[-1]})")
            found = self._environ.get(key) if kind == "env" else self._vault_value(key)
            if found is None:
                raise SecretNotFoundError(f"secret reference {m.group(0)} is not set")
            if len(found) >= 4:
                self._resolved.add(found)
            return found

        return REFERENCE.sub(substitute, value)

    def redact(self, text: str) -> str:
        """Replace every secret value this resolver handed out with ``***`` (for traces, logs, statuses)."""
        for secret in sorted(self._resolved, key=len, reverse=True):
            text = text.replace(secret, "***")
        return text


def resolve_parameters(params: Mapping[str, Any], resolver: SecretResolver | None = None) -> dict[str, Any]:
    resolver = resolver or SecretResolver()
    return {k: resolver.resolve(v) for k, v in params.items()}


def is_reference(value: Any) -> bool:
    return isinstance(value, str) and bool(REFERENCE.search(value))


REDACTED = "${vault:REDACTED}"  # what EDDI's export (and ours) writes for a literal secret


def redacted_paths(value: Any, path: str = "$") -> Iterator[str]:
    """Where ``value`` holds ``${vault:REDACTED}`` (an imported export whose secrets were scrubbed)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from redacted_paths(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from redacted_paths(v, f"{path}[{i}]")
    elif isinstance(value, str) and REDACTED in value:
        yield path
