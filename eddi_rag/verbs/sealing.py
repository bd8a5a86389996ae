"""A secret typed into a configuration is never kept as typed (issues 56 and 67): a secret field holds a reference
(``${vault:KEY}``, ``${env:NAME}``). A literal value is moved into the tenant's vault when the configuration is saved,
and the configuration keeps its reference; with the vault off it is refused, naming the field and the fix.

Secret fields, on every resource type:

- a knowledge base's: those the schema marks ``writeOnly`` (a source's ``imap.password``, ``s3.secretAccessKey``,
  ``gcs.credentials`` …) and, in the free parameter maps (``embeddingParameters``, ``storeParameters``,
  ``rerankerParameters``), those a credential's name gives away (``apiKey``, ``password``, ``authToken`` …: the export's
  ``secret_field``);
- every other type's (a providers-map entry, an LLM task's ``parameters``, an httpCall's headers and ``auth``, an
  agent's or workflow's): any value a credential's name gives away, a header by its name (``X-Api-Key``,
  ``Authorization``), but not a template over the turn (``Bearer {properties.token}``);
- on every type, the password of a URL (``postgresql://user:password@host/db``, a Mongo ``connectionString``): the
  password alone is sealed (``postgresql://user:${vault:KEY}@host/db``), so the host stays readable.

The vault key is the resource's own (``rag-<id>-<field>``, ``llm-<id>-<field>`` …), so saving the same field again
replaces its value. A configuration stored before keeps its literal until saved again, and every face shows it as
``${vault:REDACTED}`` (``shown``), which saved back keeps the stored value (``restored``)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from eddi_rag.common.secrets import REDACTED, is_reference
from eddi_rag.config import ConfigValidationError
from eddi_rag.records.vault import SecretVault, reference
from eddi_rag.sources.connectors import connectors, secret_fields
from eddi_rag.verbs.eddi_export import secret_field

PARAMETER_MAPS = ("embeddingParameters", "storeParameters", "rerankerParameters")
KEY_PREFIX = {"rags": "rag"}  # a vault key's prefix by resource type (the others: the type's name)
WHAT = {"rags": "knowledge base", "llm": "LLM configuration", "httpcalls": "httpCalls configuration",
        "providers": "provider", "agents": "agent", "workflows": "workflow"}
TEMPLATE = re.compile(r"(?<!\$)\{[A-Za-z_][A-Za-z0-9_.]*\}")  # {properties.token}: the turn's, filled at each call
_PASSWORD = re.compile(r"^([a-z][a-z0-9+.-]*://[^:/?#@\s]*:)([^@/?#\s]+)(@)", re.I)  # scheme://user:PASSWORD@


def source_secrets() -> dict[str, tuple[str, ...]]:
    """Each source type's secret fields: those its connector marks ``secret()`` (``writeOnly`` in the schema)."""
    return {kind: secret_fields(kind) for kind in connectors()}


@dataclass(frozen=True)
class Literal:
    path: str  # as a validation error names it: $.sources[0].imap.password
    keys: tuple[Any, ...]  # where it is in the configuration
    value: str  # the secret
    whole: str | None = None  # the URL it is the password of (None: the value is the field's whole)

    def key_name(self, owner: str) -> str:
        """The vault key it is kept under: its resource's own (``owner``: ``rag-<id>``), by field."""
        field = re.sub(r"[^A-Za-z0-9._-]+", ".", ".".join(str(k) for k in self.keys)).strip(".")
        return f"{owner}-{field}"[:128]

    def sealed(self, ref: str) -> str:
        """The field's value with the secret replaced by ``ref``."""
        return ref if self.whole is None else _PASSWORD.sub(lambda m: m.group(1) + ref + m.group(3), self.whole, count=1)

    @property
    def original(self) -> str:
        return self.value if self.whole is None else self.whole


def owner(kind: str, id: str) -> str:
    return f"{KEY_PREFIX.get(kind, kind)}-{id}"


def literals(data: Any, kind: str = "rags") -> list[Literal]:
    """The literal values (not references, not empty) of a configuration's secret fields."""
    if not isinstance(data, dict):
        return []
    return list(_kb_literals(data) if kind == "rags" else _named(data, ()))


def _kb_literals(data: dict[str, Any]) -> Iterator[Literal]:
    for group in PARAMETER_MAPS:
        params = data.get(group)
        for name, value in (params.items() if isinstance(params, dict) else ()):
            if secret_field(name) and _literal(value):
                yield Literal(f"$.{group}.{name}", (group, name), value)
            elif (found := _url_password(value, f"$.{group}.{name}", (group, name))) is not None:
                yield found
    sources = data.get("sources")
    for i, source in enumerate(sources if isinstance(sources, list) else ()):
        for kind, fields in source_secrets().items():
            body = source.get(kind) if isinstance(source, dict) else None
            if not isinstance(body, dict):
                continue
            for name in fields:
                if _literal(body.get(name)):
                    yield Literal(f"$.sources[{i}].{kind}.{name}", ("sources", i, kind, name), body[name])


def _named(value: Any, keys: tuple[Any, ...], parent: str | None = None) -> Iterator[Literal]:
    """Every literal secret under ``value`` (any resource but a knowledge base): by its field's name, or a URL's password."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        at = (*keys, key)
        path = "$" + "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in at)
        if isinstance(item, str):
            name = key if isinstance(key, str) else parent
            if secret_field(name, parent if isinstance(key, str) else None) and _literal(item) and not TEMPLATE.search(item):
                yield Literal(path, at, item)
            elif (found := _url_password(item, path, at)) is not None:
                yield found
        else:
            yield from _named(item, at, key if isinstance(key, str) else parent)


def _url_password(value: Any, path: str, keys: tuple[Any, ...]) -> Literal | None:
    """The password of a URL with credentials (not a reference), as a Literal of its own."""
    if not isinstance(value, str) or not (m := _PASSWORD.match(value.strip())) or is_reference(m.group(2)):
        return None
    try:
        urlsplit(value.strip())
    except ValueError:
        return None
    return Literal(path, keys, m.group(2), value.strip())


def _literal(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip()) and not is_reference(value)  # (REDACTED is a reference)


def shown(data: Any, kind: str = "rags") -> Any:
    """A stored configuration as a face shows it: a literal secret (one saved before secrets were sealed) as EDDI's
    export writes one, ``${vault:REDACTED}``; sending it back keeps the stored value (``restored``)."""
    for found in literals(data, kind):
        data = _replaced(data, found.keys, found.sealed(REDACTED))
    return data


def restored(data: Any, before: Any, kind: str = "rags") -> Any:
    """``data`` (a configuration sent to be saved) with each ``${vault:REDACTED}`` where ``before`` (the stored one)
    holds a literal secret put back to that literal: a client that saves what it read loses nothing."""
    if not isinstance(data, dict):
        return data
    for found in literals(before, kind):
        if _at(data, found.keys) == found.sealed(REDACTED):
            data = _replaced(data, found.keys, found.original)
    return data


def _at(data: Any, keys: tuple[Any, ...]) -> Any:
    for key in keys:
        if isinstance(data, dict) and isinstance(key, str):
            data = data.get(key)
        elif isinstance(data, list) and isinstance(key, int) and key < len(data):
            data = data[key]
        else:
            return None
    return data


def _replaced(data: Any, keys: tuple[Any, ...], value: str) -> Any:
    """``data`` with the value at ``keys`` replaced (copies along the way: the caller's data is not changed)."""
    if not keys:
        return value
    head, rest = keys[0], keys[1:]
    if isinstance(data, list):
        return [_replaced(v, rest, value) if i == head else v for i, v in enumerate(data)]
    return {**data, head: _replaced(data[head], rest, value)}


class Sealing:
    """What a save does with the secrets typed into a knowledge base (``seal``), and, once it is saved, keeping them
    (``keep``) or, when it is not, forgetting them (``undo``)."""

    def __init__(self, vault: SecretVault | None):
        self.vault = vault

    def seal(self, data: Any, tenant: str, id: str, kind: str = "rags") -> tuple[Any, list[tuple[str, str]]]:
        """(``data`` with each literal secret replaced by its vault reference, [(vault key, value)] to keep once the
        configuration is saved); ConfigValidationError naming every such field when the vault is off."""
        found = literals(data, kind)
        if not found:
            return data, []
        if self.vault is None or not self.vault.available:
            raise ConfigValidationError([{
                "path": f.path, "value": "(a secret: not shown)",
                "message": "a secret is kept as a reference, never as typed, and this server's vault is off (the "
                           "operator sets EDDI_VAULT_MASTER_KEY) to keep it for you: store it in the tenant's vault "
                           "(PUT /secretstore/secrets/{tenant}/{key}) or have the operator set an environment variable, "
                           "then give its reference: ${vault:KEY} or ${env:NAME}"} for f in found])
        pending = []
        for f in found:
            key = f.key_name(owner(kind, id))
            # (inside a URL the tenant is left out: the configuration's own, and no "/" in the URL's authority)
            data = _replaced(data, f.keys, f.sealed(reference(tenant, key) if f.whole is None else reference("default", key)))
            pending.append((key, f.value))
        return data, pending

    def keep(self, tenant: str, id: str, name: str, pending: list[tuple[str, str]], kind: str = "rags") -> list[tuple[str, str | None]]:
        """Store the sealed secrets; returns what each key held before (None: it is new), for ``undo``."""
        before = []
        for key, value in pending:
            assert self.vault is not None
            before.append((key, self.vault.value(tenant, key)))
            self.vault.store(tenant, key, value, f"{key.removeprefix(owner(kind, id) + '-')} of {WHAT.get(kind, kind)} {name!r}")
        return before

    def undo(self, tenant: str, before: list[tuple[str, str | None]]) -> None:
        """The vault as it was before ``keep`` (a save that failed after it)."""
        for key, value in before:
            assert self.vault is not None
            if value is None:
                self.vault.delete(tenant, key)
            else:
                self.vault.store(tenant, key, value)
