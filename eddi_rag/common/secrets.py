"""Secret references: ``${env:NAME}`` and ``${eddivault:KEY}`` (or ``${vault:KEY}``, the spelling EDDI
writes since v6).

References stay unresolved everywhere (stored configs, descriptors, API responses, traces,
cache keys). They are resolved only by :func:`resolve_parameters`, called when a provider or
store is built, and the resolved values are never logged.

The server's secrets stay the operator's:

- ``${env:NAME}`` resolves only names the operator lists in ``EDDI_RAG_SECRET_ENV`` (comma-separated;
  unset: the providers' usual key variables, PROVIDER_KEY_VARIABLES; ``""``: none). Every other name is
  "not set" for a configuration, whatever the process holds (``HOME``, the state URL, another tenant's vault).
- A key from the environment goes only where the operator points it: parameters that resolve an
  ``${env:…}`` secret may name no endpoint of their own (``baseUrl``, ``endpoint``, …) unless that endpoint is
  itself an ``${env:…}`` reference (:func:`env_secret_errors`).
- ``${vault:KEY}`` (or ``${vault:TENANT/KEY}``, EDDI's full form) is read in the configuration's own tenant: from
  the secrets vault (``records.vault``: what the tenant stored through ``/secretstore/secrets``), else, as a
  fallback for keys kept by the operator, ``EDDI_VAULT_<KEY>`` for the default tenant and
  ``EDDI_VAULT_TENANT_<TENANT>__<KEY>`` for any other (upper-cased, other characters ``_``). One tenant's keys
  never resolve in another's configuration: ``${vault:acme/key}`` resolves only in tenant ``acme``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any

from eddi_rag.errors import CONFIGURATION, EddiRagError
from eddi_rag.resource_types import DEFAULT_TENANT

ENV_SETTING = "EDDI_RAG_SECRET_ENV"
PROVIDER_KEY_VARIABLES = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "COHERE_API_KEY", "MISTRAL_API_KEY", "GEMINI_API_KEY",
                          "GOOGLE_API_KEY", "VOYAGE_API_KEY", "JINA_API_KEY", "HUGGINGFACEHUB_API_TOKEN")
# where a provider, reranker or store server is reached
ENDPOINT_PARAMETERS = ("baseUrl", "endpoint", "endpointUrl", "url", "host", "connectionString")
TENANT_VAULT_PREFIX = "EDDI_VAULT_TENANT_"
REFERENCE = re.compile(r"\$\{(env|eddivault|vault|vars):([^}]+)\}")  # vars: replaced before (eddi_rag.resources.variables)


def vault_references(groups: Collection[Mapping[str, Any]], tenant: str) -> list[tuple[str, str, str]]:
    """Every ``${vault:…}`` / ``${eddivault:…}`` in the parameter maps ``groups``: (its tenant, key, the reference)."""
    found = []
    for params in groups:
        for value in params.values():
            for m in REFERENCE.finditer(value) if isinstance(value, str) else ():
                if m.group(1) in ("vault", "eddivault"):
                    owner, _, key = m.group(2).strip().rpartition("/")
                    found.append((owner or tenant, key, m.group(0)))
    return found


class SecretNotFoundError(EddiRagError, LookupError):
    """A reference names a secret that is not available. The message names only the reference."""
    status = 409
    failure = CONFIGURATION


def _variable_part(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", value).upper()


def vault_variable(key: str, tenant: str = DEFAULT_TENANT) -> str | None:
    """The environment variable holding ``tenant``'s vault key ``key``; None when the names cannot be told
    apart from another tenant's (``__`` inside, or a default-tenant key that reads as a tenant's)."""
    name, owner = _variable_part(key), _variable_part(tenant)
    if "__" in name or (tenant != DEFAULT_TENANT and "__" in owner):
        return None
    if tenant == DEFAULT_TENANT:
        variable = "EDDI_VAULT_" + name
        return None if variable.startswith(TENANT_VAULT_PREFIX) else variable
    return f"{TENANT_VAULT_PREFIX}{owner}__{name}"


def listed_env_names(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The environment variables configurations may read (``EDDI_RAG_SECRET_ENV``)."""
    raw = (environ if environ is not None else os.environ).get(ENV_SETTING)
    names = PROVIDER_KEY_VARIABLES if raw is None else raw.split(",")
    return frozenset(n.strip() for n in names if n.strip())


class SecretResolver:
    """Resolves references in a tenant. ``vault``: the default tenant's keys as a plain mapping; by default
    each tenant's are read from environment variables (vault_variable). ``env_names``: what ``${env:…}`` may
    read (default: ``EDDI_RAG_SECRET_ENV``, read at each resolution)."""

    def __init__(self, vault: Mapping[str, str] | None = None, environ: Mapping[str, str] | None = None,
                 env_names: Collection[str] | None = None):
        self._vault = vault
        self._environ = environ if environ is not None else os.environ
        self._env_names = frozenset(env_names) if env_names is not None else None
        self._resolved: set[str] = set()  # secret values handed out, so redact() can hide them
        self._vaulted: Callable[[str, str], str | None] | None = None
        self._vault_on: Callable[[], bool] = lambda: self._vaulted is not None

    def use_vault(self, value: Callable[[str, str], str | None], available: Callable[[], bool] | None = None) -> None:
        """Read ``${vault:…}`` from the secrets vault first: ``value(tenant, key)`` (``SecretVault.value``);
        ``available()``: whether the vault is on (has a master key)."""
        self._vaulted = value
        if available is not None:
            self._vault_on = available

    @property
    def vault_on(self) -> bool:
        """Whether ``${vault:…}`` can be stored in the vault (else only environment variables hold it)."""
        return self._vault_on()

    def env_names(self) -> frozenset[str]:
        return self._env_names if self._env_names is not None else listed_env_names()

    def _vault_value(self, key: str, tenant: str) -> str | None:
        if "/" in key:  # EDDI's full form, ${vault:tenant/key}: only in that tenant
            owner, key = key.split("/", 1)
            if owner != tenant:
                return None
        if self._vaulted is not None and (found := self._vaulted(tenant, key)) is not None:
            return found
        if self._vault is not None:
            return self._vault.get(key) if tenant == DEFAULT_TENANT else None
        variable = vault_variable(key, tenant)
        return self._environ.get(variable) if variable else None

    def resolve(self, value: Any, tenant: str = DEFAULT_TENANT) -> Any:
        """``value`` with its references resolved as ``tenant`` may resolve them (SecretNotFoundError otherwise)."""
        if not isinstance(value, str) or "${" not in value:
            return value

        def substitute(m: re.Match[str]) -> str:
            kind, key = m.group(1), m.group(2).strip()
            if kind == "vars":  # a global variable that is not set (set ones were replaced when the config was read)
                raise SecretNotFoundError(f"global variable {m.group(0)} is not set (PUT /variablestore/variables/"
                                          f"<tenant>/{key.rsplit('/', 1)[-1]})")
            if kind == "env" and key not in self.env_names():
                raise SecretNotFoundError(f"secret reference {m.group(0)} is not set: configurations read only the "
                                          f"environment variables the operator lists in {ENV_SETTING}")
            found = self._environ.get(key) if kind == "env" else self._vault_value(key, tenant)
            if found is None and kind != "env":
                owner, _, name = key.rpartition("/")
                if owner and owner != tenant:
                    raise SecretNotFoundError(f"secret reference {m.group(0)} names the vault of tenant {owner!r}: a "
                                              f"configuration reads its own tenant's secrets only (${{vault:{name}}})")
                if not self.vault_on:
                    variable = vault_variable(name, tenant)
                    raise SecretNotFoundError(f"secret reference {m.group(0)} is not set: the secrets vault is off "
                                              "(EDDI_VAULT_MASTER_KEY is not set)" +
                                              (f" and no environment variable {variable} holds it" if variable else ""))
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


def resolve_parameters(params: Mapping[str, Any], resolver: SecretResolver | None = None,
                       tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
    """``params`` resolved in ``tenant``; a key from the environment bound to the operator's endpoints
    (env_secret_errors: SecretNotFoundError)."""
    if problems := env_secret_errors(params):
        raise SecretNotFoundError(problems[0]["message"])
    resolver = resolver or SecretResolver()
    return {k: resolver.resolve(v, tenant) for k, v in params.items()}


def env_secret_errors(params: Mapping[str, Any], path: str = "$") -> list[dict[str, Any]]:
    """Parameters that would send a secret of the server's environment to an endpoint a configuration chose:
    an ``${env:…}`` reference beside a literal (or vault) ``baseUrl``/``endpoint``. As {path, message, value}."""
    if not any(isinstance(v, str) and "${env:" in v for k, v in params.items() if k not in ENDPOINT_PARAMETERS):
        return []
    return [{"path": f"{path}.{k}", "value": v,
             "message": f"{k} must be the operator's (an ${{env:…}} reference) or left out when a secret comes from the "
                        "server's environment (${env:…}): a key of the server goes only to the endpoint the operator "
                        "sets; put your own key in the vault (${vault:…}) to use an endpoint of your choice"}
            for k, v in params.items()
            if k in ENDPOINT_PARAMETERS and v not in (None, "") and not (isinstance(v, str) and v.startswith("${env:"))]


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
