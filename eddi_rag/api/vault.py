"""EDDI's secrets vault (``/secretstore/secrets``, EDDI's paths and JSON): values go in and never come out. Editors
store keys and read their metadata (the Manager's forms store a key as they save); deleting, rotating the tenant's
data key and resetting a tenant's vault are an administrator's; rotating the master key the operator's (an
administrator of the default tenant). Another tenant's path answers 404; without EDDI_VAULT_MASTER_KEY, 503."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response
from fastapi.responses import JSONResponse
from pydantic import Field

from eddi_rag.api.deps import Admin, Editor, RuntimeDep
from eddi_rag.api.edge import ERROR_RESPONSES, RequestBody, Route

router = APIRouter(prefix="/secretstore/secrets", tags=["vault"], route_class=Route, responses=ERROR_RESPONSES)


ID = r"^[a-zA-Z0-9._\-]{1,128}$"  # a tenant id or key name, as EDDI allows them
TenantId = Annotated[str, Path(pattern=ID, description="the tenant (the caller's own)")]
KeyName = Annotated[str, Path(pattern=ID, description="the secret's name")]


class SecretBody(RequestBody):
    value: str = Field(min_length=1, max_length=65_536)
    description: str | None = Field(None, max_length=1000)
    allowedAgents: list[str] | None = None


class GrantBody(RequestBody):
    allowedAgents: list[str] = Field(description="the agents that may use the secret; [\"*\"] for every agent")
    description: str | None = Field(None, max_length=1000)
    expectedAllowedAgents: list[str] | None = Field(
        None, description="the grant as the caller read it: when it changed since, 409 with the current one")


class KekRotation(RequestBody):
    oldMasterKey: str = Field(min_length=1)
    newMasterKey: str = Field(min_length=16, description="a random passphrase; a weak one is a 400 naming why")


@router.get("/health")
def health(runtime: RuntimeDep) -> JSONResponse:
    """{status UP/DOWN, provider, available}; 503 when the vault has no master key."""
    found = runtime.vault.health()
    return JSONResponse(found, status_code=200 if found["available"] else 503)


@router.put("/{tenantId}/{keyName}")
def store(tenantId: TenantId, keyName: KeyName, body: SecretBody, runtime: RuntimeDep, caller: Editor) -> JSONResponse:
    """Store (201) or replace (200) a secret: {reference, tenantId, keyName}; the value is never returned."""
    created, ref = runtime.vault.store(tenantId, keyName, body.value, body.description, body.allowedAgents, caller.tenant)
    return JSONResponse(ref, status_code=201 if created else 200)


@router.put("/{tenantId}/{keyName}/grant")
def grant(tenantId: TenantId, keyName: KeyName, body: GrantBody, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """Which agents may use the secret, changed without its value (EDDI's): its metadata; 409 {error, allowedAgents}
    when ``expectedAllowedAgents`` is not the grant any more."""
    return runtime.vault.update_grant(tenantId, keyName, body.allowedAgents, body.description, body.expectedAllowedAgents,
                                      caller.tenant)


@router.post("/admin/adopt-master-key")
def adopt_master_key(runtime: RuntimeDep, caller: Admin, confirm: bool = False) -> dict[str, Any]:
    """After a lost master key: the configured EDDI_VAULT_MASTER_KEY becomes the vault's ({adopted, tenantsToReset,
    message}: the tenants whose data key it cannot open, to reset). ``confirm=true`` is required."""
    return runtime.vault.adopt_master_key(confirm, caller.tenant)


@router.get("/{tenantId}")
def list_secrets(tenantId: TenantId, runtime: RuntimeDep, caller: Editor) -> list[dict[str, Any]]:
    """The tenant's secrets' metadata: [{tenantId, keyName, createdAt, lastAccessedAt, lastRotatedAt, description,
    allowedAgents}] (no checksum: EDDI stopped returning it)."""
    return runtime.vault.list(tenantId, caller.tenant)


@router.get("/{tenantId}/{keyName}")
def metadata(tenantId: TenantId, keyName: KeyName, runtime: RuntimeDep, caller: Editor) -> dict[str, Any]:
    return runtime.vault.metadata(tenantId, keyName, caller.tenant)


@router.delete("/{tenantId}/{keyName}", response_class=Response, status_code=204)
def delete(tenantId: TenantId, keyName: KeyName, runtime: RuntimeDep, caller: Admin) -> Response:
    runtime.vault.delete(tenantId, keyName, caller.tenant)
    return Response(status_code=204)


@router.post("/{tenantId}/rotate-dek")
def rotate_dek(tenantId: TenantId, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """A new data key for the tenant, every secret re-encrypted: {tenantId, secretsReEncrypted, message}."""
    return runtime.vault.rotate_dek(tenantId, caller.tenant)


@router.post("/{tenantId}/reset")
def reset(tenantId: TenantId, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """Every secret of the tenant and its data key deleted (a lost master key): {tenantId, secretsDeleted, message}."""
    return runtime.vault.reset(tenantId, caller.tenant)


@router.post("/admin/rotate-kek")
def rotate_kek(body: KekRotation, runtime: RuntimeDep, caller: Admin) -> dict[str, Any]:
    """Every tenant's data key re-wrapped under ``newMasterKey``: {deksReEncrypted, message}. Then set
    EDDI_VAULT_MASTER_KEY to it before the next start."""
    return runtime.vault.rotate_kek(body.oldMasterKey, body.newMasterKey, caller.tenant)
