"""The Manager's pages. Each page is rendered here from the runtime, for the signed-in caller's
tenant and role (what the role may not do is not offered); its interactive parts (the editor's
save, uploads, ingestion progress, try it) call the REST API from ``static/manager.js``."""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse
from fastapi.staticfiles import StaticFiles

from eddi_rag.auth import AUDITOR, AuthError, Principal
from eddi_rag.auth.http import check_role, principal_of
from eddi_rag.auth.session import COOKIE
from eddi_rag.backends import registry
from eddi_rag.common.secrets import is_reference
from eddi_rag.config import ConfigValidationError, load_schema
from eddi_rag.resource_types import MAX_VERSION, parse_uri
from eddi_rag.ui.handlers import AuditorsPage, SignInRequired
from eddi_rag.verbs.audit import FACES
from eddi_rag.verbs.eddi_export import secret_field
from eddi_rag.verbs.knowledge_bases import KnowledgeBases
from eddi_rag.verbs.turns import answers_extractively
from eddi_rag.version import __version__

HERE = Path(__file__).parent
@functools.cache
def templates() -> Any:
    """The pages' templates, loaded at the first page (Jinja2 is off the path of a start)."""
    from fastapi.templating import Jinja2Templates

    return Jinja2Templates(directory=HERE / "templates")
router = APIRouter(prefix="/ui", include_in_schema=False)


def caller_of(request: Request) -> Principal:
    try:
        caller = principal_of(request)
    except AuthError as e:
        raise SignInRequired(request.url.path, str(e) if request.cookies.get(COOKIE) else "") from e
    if caller.role == AUDITOR and request.url.path != "/ui/audit":
        raise AuditorsPage()
    return caller


def render(request: Request, template: str, caller: Principal | None, status: int = 200, **context: Any) -> HTMLResponse:
    auth = request.app.state.auth
    return templates().TemplateResponse(request, template, {
        "caller": caller, "auth_on": auth.enabled(), "version": __version__, "status": status,
        "can_edit": caller is not None and caller.allows("editor"), "can_admin": caller is not None and caller.allows("admin"),
        "can_audit": caller is not None and caller.allows(AUDITOR),
        **context}, status_code=status)


def runtime_of(request: Request):
    return request.app.state.runtime


def kb_id_of(descriptor_uri: str) -> str:
    return parse_uri(descriptor_uri).id


# -- sign-in ----------------------------------------------------------------------------------

@router.get("/login")
def login_page(request: Request, next: str = "/ui", error: str = ""):
    return render(request, "login.html", None, next=next if next.startswith("/ui") else "/ui", error=error)


@router.post("/login")
def login(request: Request, credential: str = Form(""), next: str = Form("/ui")):
    target = next if next.startswith("/ui") else "/ui"
    credential = credential.strip()
    try:
        request.app.state.auth.principal_for(credential)
    except AuthError as e:
        return render(request, "login.html", None, 401, next=target, error=str(e))
    response = RedirectResponse(target, status_code=303)
    response.set_cookie(COOKIE, credential, httponly=True, samesite="strict", secure=request.url.scheme == "https", path="/")
    return response


@router.post("/logout")
def logout():
    response = RedirectResponse("/ui/login", status_code=303)
    response.delete_cookie(COOKIE, path="/")
    return response


# -- knowledge bases --------------------------------------------------------------------------

@router.get("")
def knowledge_bases(request: Request, filter: str = "", message: str = "", error: str = ""):
    return _list_page(request, filter, message, error)


def _list_page(request: Request, filter: str = "", message: str = "", error: str = "",
               draft: dict[str, Any] | None = None, status: int = 200) -> HTMLResponse:
    """The knowledge bases; ``draft``: what the create dialog was given, shown again (open) beside ``error``."""
    caller = caller_of(request)
    runtime = runtime_of(request)
    last = runtime.ingesting.last_ingested()
    rows = []
    for d in runtime.knowledge_bases.every(caller.tenant, filter):
        id = kb_id_of(d.resource)
        if not runtime.grants.may(caller, id, "VIEW"):
            continue
        config = runtime.catalog.read("rags", id)
        rows.append({"id": id, "name": d.name, "storeType": config.get("storeType", "in-memory"),
                     "provider": (f"provider {config['embeddingProviderId']}" if config.get("embeddingProviderId")
                                  else config.get("embeddingProvider") or "(none: embedding disabled)"), "modified": d.lastModifiedOn,
                     "lastIngestion": last.get(id), "version": parse_uri(d.resource).version})
    provider, store = (draft or {}).get("embeddingProvider") or "local", (draft or {}).get("storeType") or "sqlite"
    required = {"embeddingParameters": {provider: needed_parameters(registry.EMBEDDINGS, provider)},
                "storeParameters": {store: needed_parameters(registry.STORES, store)}}  # (the dialog asks for others)
    return render(request, "kbs.html", caller, status, kbs=rows, filter=filter, message=message, error=error,
                  stores=registry.names(registry.STORES), providers=registry.names(registry.EMBEDDINGS),
                  required=required, draft=draft or {})


GROUPS = {"embeddingParameters": registry.EMBEDDINGS, "storeParameters": registry.STORES}


@functools.lru_cache(maxsize=256)
def needed_parameters(group: str, name: str) -> list[dict[str, Any]]:
    """What one provider or store needs before it can work, for the create dialog: [{name, description, secret}]. Of
    alternatives (a URL or a password) the first is asked for. Asked for one at a time (the page holds the default
    choice's; the dialog asks ``/ui/parameters`` for another): reading a backend's schema imports its client library,
    and all of them took 7 s of the Manager's first page."""
    if name not in registry.names(group):
        return []
    schema = registry.description(group, name).get("schema") or {}
    needed = list(schema.get("required") or [])
    for alternative in (schema.get("anyOf") or schema.get("oneOf") or [])[:1]:
        needed += [k for k in alternative.get("required", []) if k not in needed]
    props = schema.get("properties") or {}
    return [{"name": k, "description": props.get(k, {}).get("description", ""), "secret": secret_field(k)} for k in needed]


@router.get("/parameters")
def parameters(request: Request, group: str, name: str) -> JSONResponse:
    """``needed_parameters`` of ``name`` in ``group`` (embeddingParameters or storeParameters), for the create dialog."""
    caller_of(request)
    if group not in GROUPS or name not in registry.names(GROUPS[group]):
        return JSONResponse({"error": f"no {group} of {name!r}"}, 404)
    return JSONResponse(needed_parameters(GROUPS[group], name))


def _back(message: str = "", error: str = "", to: str = "/ui") -> RedirectResponse:
    query = f"message={quote(message)}" if message else f"error={quote(error)}" if error else ""
    return RedirectResponse(f"{to}?{query}" if query else to, status_code=303)


def _editor(caller: Principal) -> None:
    check_role(caller, "editor", "change knowledge bases")


@router.post("/kbs")
async def create_kb(request: Request):
    """A new knowledge base from the create dialog: name, store, provider and what they require
    (``embeddingParameters.<name>`` / ``storeParameters.<name>`` fields, a secret as a reference). Then its
    Documents page; on an error the dialog again, open, with what was typed."""
    caller = caller_of(request)
    _editor(caller)
    runtime = runtime_of(request)
    form = await request.form()
    fields = {k: str(v).strip() for k, v in form.items() if isinstance(v, str)}
    data: dict[str, Any] = {"name": fields.get("name", ""), "embeddingProvider": fields.get("embeddingProvider", "local"),
                            "storeType": fields.get("storeType", "sqlite")}
    typed_keys: list[tuple[str, str, str]] = []  # (group, param, the key itself): kept in the vault, never shown again
    for key, value in fields.items():
        group, _, param = key.partition(".")
        if group in ("embeddingParameters", "storeParameters") and param and value:
            if secret_field(param) and not is_reference(value):
                typed_keys.append((group, param, value))
                continue
            data.setdefault(group, {})[param] = value
    if typed_keys and not runtime.vault.available:
        return _list_page(request, error="Not created: a key typed here is kept in the tenant's vault, and the vault is off "
                          "(the operator sets EDDI_VAULT_MASTER_KEY). Or give a reference, such as ${env:OPENAI_API_KEY}, "
                          "to a key the operator keeps.", draft=data, status=400)
    draft = copy.deepcopy(data)  # what the dialog shows again on a refusal: never a typed key, nor its vault name
    vaulted = [(group, param, value, _vault_name(runtime, caller.tenant, data, param)) for group, param, value in typed_keys]
    for group, param, _, name in vaulted:
        data.setdefault(group, {})[param] = f"${{vault:{name}}}"
    problem = None if typed_keys else runtime.health.unresolved_in(data, caller.tenant)
    if problem is not None:  # never created silently broken: said here, with its fix, what was typed kept
        fix = ("type the key itself into its field above (it is kept in this tenant's vault), or reference one the "
               "operator keeps, such as ${env:OPENAI_API_KEY}") if problem["check"] == "secrets" else problem["fix"]
        return _list_page(request, error=f"Not created: {problem['detail']}. Fix: {fix}", draft=draft, status=400)
    try:
        ref = runtime.saving.create("rags", data, caller.tenant, who=caller)
    except ConfigValidationError as e:
        return _list_page(request, error="Not created: " + "; ".join(f"{x['path']}: {x['message']}" for x in e.errors),
                          draft=draft, status=400)
    for group, param, value, name in vaulted:  # stored once the configuration is: a refused one stores nothing
        runtime.vault.store(caller.tenant, name, value, f"{data['embeddingProvider'] if group == 'embeddingParameters' else data['storeType']} "
                            f"{param} of knowledge base {data['name']!r}", caller_tenant=caller.tenant)
    return _back(message=f"Created {data['name']!r}. Add its documents here; its settings are under Configuration.",
                 to=f"/ui/kbs/{ref.id}/documents")


def _vault_name(runtime: Any, tenant: str, data: dict[str, Any], param: str) -> str:
    """A vault key name of its own for a key typed in the create dialog: ``<kb name>-<param>``, numbered past one taken."""
    base = "".join(ch if ch.isalnum() or ch in "._-" else "-" for ch in f"{data.get('name', 'kb')}-{param}".lower())[:100].strip("-")
    taken = {m["keyName"] for m in runtime.vault.list(tenant, tenant)}
    return next(n for n in (base, *(f"{base}-{i}" for i in range(2, 10_000))) if n not in taken)


@router.post("/kbs/{id}/duplicate")
def duplicate_kb(id: str, request: Request):
    """A copy under a name of its own (LLM tasks name knowledge bases: two of one name would be ambiguous)."""
    caller = caller_of(request)
    _editor(caller)
    runtime = runtime_of(request)
    data = runtime.catalog.read("rags", id, tenant=caller.tenant)
    runtime.grants.check(caller, id, "VIEW")  # (as REST's: a knowledge base shared with others is theirs to copy)
    taken = {d.name for d in runtime.knowledge_bases.every(caller.tenant)}
    base = f"{data.get('name', id)} (copy"
    name = next(n for n in (f"{base})", *(f"{base} {i})" for i in range(2, 10000))) if n not in taken)
    ref = runtime.saving.duplicate("rags", id, who=caller, name=name)
    return _back(message=f"Duplicated as {name!r} ({ref.id}); its documents are not copied.")


@router.post("/kbs/{id}/delete")
def delete_kb(id: str, request: Request, permanent: bool = Form(False), confirmName: str = Form("")):
    caller = caller_of(request)
    _editor(caller)
    runtime = runtime_of(request)
    name = runtime.catalog.read("rags", id, tenant=caller.tenant).get("name", "")
    if not permanent:
        runtime.saving.delete("rags", id)
        return _back(message=f"Deleted {name!r} (soft: its configuration is kept and its chunks are not dropped).")
    check_role(caller, "editor", "delete permanently")  # as EDDI: editors delete permanently
    if confirmName != name:
        return _back(error=f"Not deleted: type the knowledge base's name {name!r} exactly to delete it permanently.")
    runtime.saving.delete("rags", id, permanent=True)
    return _back(message=f"Deleted {name!r} permanently, with its chunks.")


@router.post("/kbs/{id}/restore")
def restore_version(id: str, request: Request, version: int = Form(..., ge=1, le=MAX_VERSION)):
    """Version ``version``'s configuration saved again as the newest version (history keeps every one)."""
    caller, runtime, kb, _ = _kb(request, id)
    _editor(caller)
    ref = runtime.saving.update("rags", id, kb["version"], runtime.catalog.read("rags", id, version), caller.tenant, who=caller)
    return _back(message=f"Version {version} restored as version {ref.version}.", to=f"/ui/kbs/{id}")


def _kb(request: Request, id: str) -> tuple[Principal, Any, dict[str, Any], dict[str, Any]]:
    """(caller, runtime, {id, name, version}, config) of one of the caller's KBs, at its current version."""
    caller = caller_of(request)
    runtime = runtime_of(request)
    version = runtime.catalog.current_version("rags", id, caller.tenant)
    config = runtime.catalog.shown("rags", id, version)
    runtime.grants.check(caller, id, "VIEW")  # a knowledge base shared with named users and groups: theirs
    return caller, runtime, {"id": id, "name": config.get("name", id), "version": version}, config


def _kb_page(request: Request, id: str, template: str, tab: str, **context: Any) -> HTMLResponse:
    caller, _, kb, config = _kb(request, id)
    said = request.query_params  # a message or error from a redirect (_back)
    return render(request, template, caller, kb=kb, config=config, tab=tab, message=said.get("message", "")[:500],
                  error=said.get("error", "")[:500], cautions=KnowledgeBases.warnings(config), **context)


@router.get("/kbs/{id}/document")
def document_page(id: str, request: Request, d: str = Query(..., min_length=1, max_length=2000)):
    """One document: its chunks, switched on or off; re-parse; replace its file."""
    name = d.split("#", 1)[0]  # an appended ingestion's document is <name>#<ingestion id>
    return _kb_page(request, id, "kb_document.html", "documents", document=d, name=name)


@router.get("/kbs/{id}")
def editor(id: str, request: Request):
    caller = caller_of(request)
    saved = {v["version"]: v for v in runtime_of(request).catalog.versions("rags", id, caller.tenant)}
    return _kb_page(request, id, "kb_config.html", "config", saved=saved)


@router.get("/kbs/{id}/diff")
def diff(id: str, request: Request, a: int = Query(1, ge=1, le=MAX_VERSION), b: int = Query(0, ge=0, le=MAX_VERSION)):
    caller, runtime, kb, config = _kb(request, id)
    b = b or kb["version"]

    def lines(version: int) -> list[str]:
        return json.dumps(runtime.catalog.shown("rags", id, version), indent=2, sort_keys=True).splitlines()

    whole = lines(a) if a == b else None  # one version, whole
    changes = [] if whole else _changed_fields(runtime.catalog.shown("rags", id, a), runtime.catalog.shown("rags", id, b))
    return render(request, "kb_diff.html", caller, kb=kb, config=config, tab="config", a=a, b=b, changes=changes, whole=whole)


def _changed_fields(before: dict[str, Any], after: dict[str, Any]) -> list[dict[str, str]]:
    """Each field that differs between two versions, {field, label, before, after} (a value as JSON; "(not set)" where
    a version has none), in the schema's order: what a reader compares, not a diff of JSON lines."""
    labels = {name: spec.get("x-label", name) for name, spec in load_schema().get("properties", {}).items()}
    flat_a, flat_b = _flat(before), _flat(after)
    order = list(labels)
    fields = sorted(flat_a.keys() | flat_b.keys(), key=lambda f: (order.index(f.split(".")[0].split("[")[0])
                                                                 if f.split(".")[0].split("[")[0] in order else len(order), f))
    unset = "(not set)"
    return [{"field": f, "label": labels.get(f, f), "before": flat_a.get(f, unset), "after": flat_b.get(f, unset)}
            for f in fields if flat_a.get(f) != flat_b.get(f)]


def _flat(value: Any, path: str = "") -> dict[str, str]:
    """``value``'s leaves by path (``sources[0].url``), each as JSON."""
    if isinstance(value, dict) and value:
        return {k: v for key, item in value.items() for k, v in _flat(item, f"{path}.{key}" if path else key).items()}
    if isinstance(value, list) and value and any(isinstance(v, (dict, list)) for v in value):
        return {k: v for i, item in enumerate(value) for k, v in _flat(item, f"{path}[{i}]").items()}
    return {path: json.dumps(value, ensure_ascii=False)}


@router.get("/kbs/{id}/documents")
def documents(id: str, request: Request):
    return _kb_page(request, id, "kb_documents.html", "documents", formats=runtime_of(request).ingesting.formats())


@router.get("/kbs/{id}/try")
def try_it(id: str, request: Request):
    return _kb_page(request, id, "kb_try.html", "try")


# -- across knowledge bases -------------------------------------------------------------------

@router.get("/feedback")
def feedback(request: Request, vote: str = "down", reviewed: str = "no"):
    """The votes to review (thumbs down not yet reviewed, by default), each with what can be done about it."""
    caller = caller_of(request)
    runtime = runtime_of(request)
    done = {"no": False, "yes": True}.get(reviewed)  # "all": both
    items = runtime.feedback.list(caller.tenant, None, vote if vote in ("up", "down") else None, reviewed=done, caller=caller)
    names = {kb_id_of(d.resource): d.name for d in runtime.knowledge_bases.every(caller.tenant)}
    return render(request, "feedback.html", caller, items=items, vote=vote, reviewed=reviewed, names=names)


@router.get("/agents")
def agents(request: Request):
    caller = caller_of(request)
    runtime = runtime_of(request)
    found = [{"id": kb_id_of(d.resource), "name": d.name or kb_id_of(d.resource)}
             for d in runtime.catalog.every("agents", caller.tenant)]
    model = request.app.state.chat_model
    return render(request, "agents.html", caller, agents=found, chat_model=model is not None,
                  extractive=answers_extractively(model))


@router.get("/health")
def health(request: Request):
    caller = caller_of(request)
    runtime = runtime_of(request)
    kbs = [{"id": kb_id_of(d.resource), "name": d.name} for d in runtime.knowledge_bases.every(caller.tenant)]
    return render(request, "health.html", caller, kbs=kbs)


@router.get("/admin")
def admin(request: Request):
    """The tenant's administration: API keys, the group directory (each membership's origin), the vault's state."""
    caller = caller_of(request)
    if not caller.allows("admin"):
        return render(request, "error.html", caller, status=403,
                      message="This page is for the tenant's administrators: API keys, the group directory and the vault.")
    runtime = runtime_of(request)
    return render(request, "admin.html", caller, vault_on=runtime.vault.health()["available"],
                  key_file=str(runtime.vault.key_file or ""))


@router.get("/audit")
def audit(request: Request):
    """The audit record (auditors and administrators): entries filtered as an auditor asks, exports, the chain verified;
    administrators also set what is kept and erase a user's queries."""
    caller = caller_of(request)
    if not caller.allows(AUDITOR):
        return render(request, "error.html", caller, status=403,
                      message="This page is for the tenant's auditors and administrators: the audit record.")
    return render(request, "audit.html", caller, faces=FACES)


def install(app: FastAPI, include: Callable[[APIRouter], None] | None = None) -> None:
    """Mount the UI: its pages, its static files, ``/`` → ``/ui``, its error pages (its sign-in: ``handlers``, at the
    app's making). ``include``: how the pages' router is included (default ``app.include_router``)."""
    app.mount("/ui/static", StaticFiles(directory=HERE / "static"), name="ui-static")
    (include or app.include_router)(router)

    @app.get("/", include_in_schema=False)
    def root():
        return RedirectResponse("/ui", status_code=307)

    app.state.error_page = error_page


def error_page(request: Request, status: int, message: str) -> HTMLResponse | None:
    """An error met by a page (not by the API): the same message, as a page (None: not a page)."""
    if not is_page(request):
        return None
    caller = getattr(request.state, "principal", None)
    return render(request, "error.html", caller, status, message=message)


def is_page(request: Request) -> bool:
    return request.url.path == "/ui" or (request.url.path.startswith("/ui/") and not request.url.path.startswith("/ui/static/"))

