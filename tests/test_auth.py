"""Who may do what: API keys and OIDC tokens, roles, user binding, revocation; the server refusing
to serve a network unprotected. (Tenant isolation has its own tests.)"""

from __future__ import annotations

import json
import logging
import time

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi.testclient import TestClient

from eddi_rag.api.app import create_app
from eddi_rag.auth.oidc import OidcConfig
from eddi_rag.runtime import Runtime
from tests.support.app import app_client
from tests.support.wire import WireStandIn
from tests.test_api import BASE, kb_id
from tests.test_cli_demo import eddi_rag, in_process

KB = {"name": "kb", "embeddingProvider": "local", "storeType": "sqlite", "minScore": 0}


@pytest.fixture
def world(tmp_path):
    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as client:
        keys = {role: runtime.keys.create("acme", role)[1] for role in ("viewer", "editor", "admin")}
        keys["alice"] = runtime.keys.create("acme", "viewer", user="alice")[1]
        keys["service"] = runtime.keys.create("acme", "editor", acts_for_users=True, name="agent runtime")[1]
        kb = kb_id(client.post(BASE, json=KB, headers=as_(keys["admin"])))
        # only a credential acting for users may ingest another user's documents: the service key
        ingested = client.post(f"{BASE}/{kb}/documents", headers=as_(keys["service"]), json={"documents": [
            {"document_id": "shared.md", "text": "The shared handbook says lockers open at 7."},
            {"document_id": "alice.md", "text": "Alice's locker code is 4711.", "user_id": "alice"},
            {"document_id": "bob.md", "text": "Bob's locker code is 1234.", "user_id": "bob"}]})
        assert ingested.json()["documents_processed"] == 3, ingested.text
        assert client.post(f"{BASE}/{kb}/documents", headers=as_(keys["admin"]), json={"documents": [
            {"document_id": "x.md", "text": "x", "user_id": "alice"}]}).status_code == 403
        client.kb, client.keys = kb, keys
        yield client
    runtime.close()


def as_(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_no_credential_or_a_bad_one_is_401_health_stays_open(world):
    assert world.get("/health").status_code == 200
    r = world.get(f"{BASE}/descriptors")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer" and "credential is required" in r.json()["error"]
    assert world.get(f"{BASE}/descriptors", headers=as_("erk_nope_nope")).status_code == 401
    assert world.get(f"{BASE}/descriptors", headers=as_("random-garbage")).status_code == 401
    assert world.get(f"{BASE}/descriptors", headers={"X-API-Key": world.keys["viewer"]}).status_code == 200
    assert world.get("/openapi.json").status_code == 401 and world.get("/docs").status_code == 401
    assert world.get("/docs/files/swagger-ui-bundle.js").status_code == 401  # (issue 67: the page's own scripts, served here)
    assert world.get("/openapi.json", headers=as_(world.keys["viewer"])).status_code == 200


def test_a_revoked_key_is_refused(world):
    runtime = world.app.state.runtime
    info, secret = runtime.keys.create("acme", "admin", name="temp")
    assert world.get(f"{BASE}/descriptors", headers=as_(secret)).status_code == 200
    assert world.delete(f"/keys/{info.id}", headers=as_(world.keys["admin"])).json()["revokedOn"]
    r = world.get(f"{BASE}/descriptors", headers=as_(secret))
    assert r.status_code == 401 and "revoked" in r.json()["error"]


ROUTES = [  # (family, method, path, body, role needed)
    ("read resources", "GET", "{BASE}/{kb}", None, "viewer"),
    ("read resources", "GET", "{BASE}/descriptors", None, "viewer"),
    ("providers", "GET", "/providers", None, "viewer"),
    ("query", "POST", "{BASE}/{kb}/query", {"query": "lockers"}, "viewer"),
    ("retrieve", "POST", "{BASE}/{kb}/retrieve", {"query": "lockers", "minRelevance": 0}, "viewer"),
    ("health", "GET", "{BASE}/{kb}/health", None, "viewer"),
    ("write resources", "POST", "{BASE}", KB, "editor"),
    ("write resources", "PUT", "{BASE}/{kb}?version=1", KB, "editor"),
    ("write resources", "POST", "{BASE}/{kb}", None, "editor"),
    ("ingest", "POST", "{BASE}/{kb}/documents", {"documents": [{"document_id": "n.md", "text": "New."}]}, "editor"),
    ("ingest", "POST", "{BASE}/{kb}/ingest?documentName=x.txt", "text body", "editor"),
    ("sources", "POST", "{BASE}/{kb}/sources/nope/run", None, "editor"),
    ("collections read", "GET", "/collections", None, "viewer"),
    ("collections write", "POST", "/collections", {"name": "c-{role}"}, "editor"),
    ("purge", "POST", "{BASE}/{kb}/purge", None, "admin"),
    ("keys", "GET", "/keys", None, "admin"),
    ("delete permanently", "DELETE", "{BASE}/{kb}?permanent=true", None, "editor"),  # as EDDI: editors may
    ("sources", "DELETE", "{BASE}/{kb}/sources/nope/documents", None, "editor"),  # the purge
]
ORDER = ["viewer", "editor", "admin"]


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    """One server and its keys for the module's role checks (each gets a knowledge base of its own)."""
    with app_client(tmp_path_factory.mktemp("roles")) as client:
        client.keys = {role: client.runtime.keys.create("acme", role)[1] for role in ORDER}
        yield client


@pytest.mark.parametrize("role", ORDER)
@pytest.mark.parametrize("family,method,path,body,needed", ROUTES, ids=[f"{r[0]}:{r[1]} {r[2]}" for r in ROUTES])
def test_each_role_on_each_endpoint_family(keyed, role, family, method, path, body, needed):
    world = keyed
    kb = kb_id(world.post(BASE, json=KB, headers=as_(world.keys["admin"])))  # its own: writes and deletes touch only it
    url = path.format(BASE=BASE, kb=kb, role=role)
    if isinstance(body, dict):
        body = json.loads(json.dumps(body).replace("{role}", role))
    kwargs = {"json": body} if isinstance(body, dict) else {"content": body} if body else {}
    r = world.request(method, url, headers=as_(world.keys[role]), **kwargs)
    if ORDER.index(role) < ORDER.index(needed):
        assert r.status_code == 403, (r.status_code, r.text)
        assert "needs '" in r.json()["error"]
    else:
        assert r.status_code < 400 or (family == "sources" and r.status_code == 404), (r.status_code, r.text)


def texts(response) -> set[str]:
    return {h["source"] for h in response.json()["results"]}


def test_a_user_bound_key_retrieves_as_its_user_and_cannot_impersonate(world):
    ask = {"query": "locker code", "maxResults": 5}
    assert texts(world.post(f"{BASE}/{world.kb}/query", json=ask, headers=as_(world.keys["alice"]))) == {"shared.md", "alice.md"}
    r = world.post(f"{BASE}/{world.kb}/query", json={**ask, "userId": "bob"}, headers=as_(world.keys["alice"]))
    assert r.status_code == 403 and "may not act for user 'bob'" in r.json()["error"]
    r = world.post(f"{BASE}/{world.kb}/retrieve", json={"query": "locker code", "userId": "bob"}, headers=as_(world.keys["viewer"]))
    assert r.status_code == 403  # a key without a user sees shared chunks only, and names nobody
    assert texts(world.post(f"{BASE}/{world.kb}/query", json=ask, headers=as_(world.keys["viewer"]))) == {"shared.md"}
    # the agent runtime's service key names the user of the turn
    assert texts(world.post(f"{BASE}/{world.kb}/query", json={**ask, "userId": "bob"},
                            headers=as_(world.keys["service"]))) == {"shared.md", "bob.md"}


def test_a_user_bound_editor_ingests_as_its_user(world):
    runtime = world.app.state.runtime
    carol = runtime.keys.create("acme", "editor", user="carol")[1]
    r = world.post(f"{BASE}/{world.kb}/documents", headers=as_(carol),
                   json={"documents": [{"document_id": "carol.md", "text": "Carol's notes."}]})
    assert r.json()["documents_processed"] == 1
    (chunk,) = runtime.stores.get(world.kb, runtime.rag_config(world.kb)).get({"document_id": "carol.md"})
    assert chunk.metadata["user_id"] == "carol" and chunk.metadata["private"] is True
    r = world.post(f"{BASE}/{world.kb}/documents", headers=as_(carol),
                   json={"documents": [{"document_id": "x.md", "text": "x", "user_id": "dave"}]})
    assert r.status_code == 403


def test_secrets_never_in_responses_or_logs(world, caplog):
    caplog.set_level(logging.DEBUG)
    listed = world.get("/keys", headers=as_(world.keys["admin"]))
    assert listed.status_code == 200 and len(listed.json()) == 5
    assert not any(secret in listed.text for secret in world.keys.values()) and "hash" not in listed.text
    made = world.post("/keys", json={"role": "viewer", "name": "made over REST"}, headers=as_(world.keys["admin"]))
    assert made.status_code == 201 and made.json()["key"].startswith("erk_") and made.json()["tenant"] == "acme"
    wrong = world.keys["admin"][:-4] + "XXXX"
    world.get(f"{BASE}/descriptors", headers=as_(wrong))
    assert wrong not in caplog.text and not any(s in caplog.text for s in world.keys.values())


# --- tenants: another tenant's resources do not exist ------------------------------------

def test_another_tenant_sees_nothing_on_any_route(world):
    runtime = world.app.state.runtime
    other = as_(runtime.keys.create("globex", "admin")[1])
    acme = as_(world.keys["admin"])
    kb = world.kb
    job = world.post(f"{BASE}/{kb}/ingest?documentName=n.txt", content=b"Acme notes.", headers=acme).json()["ingestionId"]
    world.post("/collections", json={"name": "acme-only"}, headers=acme)
    world.post("/collections/acme-only/documents", json={"documents": [{"text": "x", "embedding": [0.1, 0.2]}]}, headers=acme)
    agent = world.post("/agentstore/agents", json={"workflows": []}, headers=acme).headers["Location"].split("/")[-1].split("?")[0]
    attempts = [("GET", f"{BASE}/{kb}", None), ("PUT", f"{BASE}/{kb}?version=1", KB), ("POST", f"{BASE}/{kb}", None),
                ("DELETE", f"{BASE}/{kb}", None), ("DELETE", f"{BASE}/{kb}?permanent=true", None),
                ("POST", f"{BASE}/{kb}/query", {"query": "locker"}), ("POST", f"{BASE}/{kb}/retrieve", {"query": "locker"}),
                ("POST", f"{BASE}/{kb}/documents", {"documents": [{"document_id": "x", "text": "x"}]}),
                ("POST", f"{BASE}/{kb}/ingest?documentName=x.txt", "text"), ("GET", f"{BASE}/{kb}/ingestion/{job}/status", None),
                ("POST", f"{BASE}/{kb}/purge", None), ("GET", f"{BASE}/{kb}/health", None),
                ("POST", f"{BASE}/{kb}/sources/s/run", None), ("GET", f"{BASE}/{kb}/sources/s/runs", None),
                ("GET", "/collections/acme-only", None), ("GET", "/collections/acme-only/documents", None),
                ("POST", "/collections/acme-only/documents", {"documents": [{"text": "y", "embedding": [0.1, 0.2]}]}),
                ("PUT", "/collections/acme-only/metadata", {"metadata": {}}), ("DELETE", "/collections/acme-only", None),
                ("GET", f"/agentstore/agents/{agent}", None), ("DELETE", f"/agentstore/agents/{agent}", None)]
    for method, url, body in attempts:
        kwargs = {"json": body} if isinstance(body, dict) else {"content": body} if body else {}
        r = world.request(method, url, headers=other, **kwargs)
        assert r.status_code == 404, (method, url, r.status_code, r.text)
    assert world.get(f"{BASE}/descriptors", headers=other).json() == []
    assert world.get("/collections", headers=other).json() == {"collections": []}
    assert all(k["tenant"] == "globex" for k in world.get("/keys", headers=other).json())
    acme_key = world.get("/keys", headers=acme).json()[0]["id"]
    assert world.delete(f"/keys/{acme_key}", headers=other).status_code == 404
    # and acme still has everything, untouched
    assert world.get(f"{BASE}/{kb}", headers=acme).status_code == 200
    assert world.get("/collections/acme-only", headers=acme).json()["count"] == 1
    assert [d["resource"].split("/")[-1].split("?")[0] for d in world.get(f"{BASE}/descriptors", headers=acme).json()] == [kb]
    # the same collection name in two tenants is two collections
    assert world.post("/collections", json={"name": "acme-only"}, headers=other).status_code == 201


# --- OIDC -------------------------------------------------------------------------------

ISSUER, AUDIENCE = "https://keycloak.example/realms/eddi", "eddi-rag"


@pytest.fixture(scope="module")
def signing():
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(private.public_key()))
    jwks = {"keys": [{**jwk, "kid": "k1", "use": "sig", "alg": "RS256"}]}
    with WireStandIn(lambda request: (200, jwks)) as server:
        yield private, other, server


def token(key, roles=("eddi-editor",), tenant="acme", sub="u-123", aud=AUDIENCE, iss=ISSUER, exp=300, kid="k1",
          **more) -> str:
    claims = {"sub": sub, "iss": iss, "aud": aud, "exp": int(time.time()) + exp, "tenant": tenant,
              "realm_access": {"roles": list(roles)}, **more}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": kid})


@pytest.fixture
def oidc_client(tmp_path, signing):
    private, other, server = signing
    runtime = Runtime(tmp_path)
    config = OidcConfig(jwks_url=server.url + "/protocol/openid-connect/certs", issuer=ISSUER, audience=AUDIENCE)
    with TestClient(create_app(runtime, oidc=config)) as client:
        client.private, client.other = private, other
        yield client
    runtime.close()


def test_oidc_tokens_verified_against_the_jwks(oidc_client):
    c = oidc_client
    assert c.get(f"{BASE}/descriptors").status_code == 401  # OIDC configured: auth is on without any key
    assert c.post(BASE, json=KB, headers=as_(token(c.private))).status_code == 201
    viewer = token(c.private, roles=("eddi-viewer", "offline_access"))
    assert c.get(f"{BASE}/descriptors", headers=as_(viewer)).status_code == 200
    assert c.post(BASE, json=KB, headers=as_(viewer)).status_code == 403
    for bad, why in [(token(c.private, exp=-60), "expired"), (token(c.private, aud="someone-else"), "audience"),
                     (token(c.private, iss="https://evil.example"), "issuer"), (token(c.other), "signature")]:
        r = c.get(f"{BASE}/descriptors", headers=as_(bad))
        assert r.status_code == 401, why
        assert why.split()[0].lower() in r.json()["error"].lower(), (why, r.json())
    for roles in [("offline_access",), ("eddi-user",), ("eddi-approver", "eddi-user")]:  # valid, but no role here
        r = c.get(f"{BASE}/descriptors", headers=as_(token(c.private, roles=roles)))
        assert r.status_code == 403 and "none of the roles" in r.json()["error"], (roles, r.json())  # EDDI: 403


def test_an_oidc_readers_groups_come_from_its_claim_and_its_email_only_when_verified(oidc_client):
    """Who may read what (docs/permissions.md): a token's groups claim (Keycloak's, with its leading slash) are the
    reader's groups; its e-mail counts only with email_verified true; nothing a request body says counts."""
    c = oidc_client
    runtime = c.app.state.runtime
    kb = kb_id(c.post(BASE, json={**KB, "audience": "DOCUMENT_ACL"}, headers=as_(token(c.private))))
    runtime.ingest(kb, "budget.md", "The finance budget is 4.2 million.", acl=["group:finance"])
    runtime.ingest(kb, "mail.md", "Ann's finance payslip is ready.", acl=["email:ann@example.org"])
    ask = {"query": "finance budget payslip", "maxResults": 5}

    def read(**claims) -> set[str]:
        r = c.post(f"{BASE}/{kb}/query", json=ask, headers=as_(token(c.private, roles=("eddi-viewer",), sub="ann", **claims)))
        assert r.status_code == 200, r.text
        return {h["source"] for h in r.json()["results"]}

    assert read(groups=["/finance"]) == {"budget.md"}
    assert read(groups=["/sales"], email="ann@example.org", email_verified=True) == {"mail.md"}
    assert read(email="ann@example.org", email_verified=False) == set()
    assert read(email="ann@example.org") == set()  # no email_verified: not taken


@pytest.mark.integration
def test_serve_refuses_a_network_address_without_credentials(tmp_path):
    result = eddi_rag("serve", "--host", "0.0.0.0", "--port", "1", "--data-dir", str(tmp_path / "d"))
    assert result.returncode != 0 and "refusing to serve 0.0.0.0 with no credential configured" in result.stderr


@pytest.mark.integration
def test_cli_keys_create_list_revoke(tmp_path):
    data = str(tmp_path / "d")
    made = eddi_rag("keys", "create", "--tenant", "acme", "--role", "editor", "--user", "alice", "--name", "ci",
                    "--data-dir", data)
    assert made.returncode == 0, made.stderr
    secret = made.stdout.strip().splitlines()[-1]
    assert secret.startswith("erk_") and len(secret) > 40
    key_id = secret.split("_")[1]
    listed = in_process("keys", "list", "--data-dir", data).stdout
    assert key_id in listed and "alice" in listed and secret not in listed
    assert "revoked key " + key_id in in_process("keys", "revoke", key_id, "--data-dir", data).stdout
    assert in_process("keys", "create", "--tenant", "acme", "--role", "boss", "--data-dir", data).returncode == 2


def test_the_ui_sign_in_cookie_authorises_only_changes_from_our_own_pages(world):
    """The Manager keeps the credential in an HttpOnly, SameSite=Strict cookie; a change it
    authorises must carry this server's Origin, so another site cannot make one (CSRF)."""
    bad = world.post("/ui/login", data={"credential": "erk_nope_nope", "next": "/ui"}, follow_redirects=False)
    assert bad.status_code == 401 and "cookie" not in bad.headers.get("set-cookie", "")
    signed = world.post("/ui/login", data={"credential": world.keys["editor"], "next": "/ui"}, follow_redirects=False)
    assert signed.status_code == 303 and signed.headers["location"] == "/ui"
    cookie = signed.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert world.get(f"{BASE}/descriptors").status_code == 200  # reads: the cookie alone
    query = {"query": "lockers"}
    assert world.post(f"{BASE}/{world.kb}/query", json=query, headers={"Origin": "https://evil.example"}).status_code == 401
    assert world.post(f"{BASE}/{world.kb}/query", json=query).status_code == 401  # no Origin: refused too
    assert world.post(f"{BASE}/{world.kb}/query", json=query, headers={"Origin": "http://testserver"}).status_code == 200
    out = world.post("/ui/logout", headers={"Origin": "http://testserver"}, follow_redirects=False)
    assert out.status_code == 303 and world.get(f"{BASE}/descriptors").status_code == 401
    page = world.get("/ui/kbs/x", follow_redirects=False)
    assert page.status_code == 303 and page.headers["location"].startswith("/ui/login?next=/ui/kbs/x")


def test_each_version_says_when_and_by_whom_it_was_saved(world, tmp_path):
    """Issue 58, finding 10: configuration versions record their author and time (GET …/{id}/versions, the Manager's
    Versions list); the secret a key is never shown, only its id."""
    kb = world.kb
    bob = world.app.state.runtime.keys.create("acme", "editor", user="bob")[1]
    current = world.get(f"{BASE}/{kb}", headers=as_(world.keys["admin"])).json()
    saved = world.put(f"{BASE}/{kb}?version=1", json={**current, "maxResults": 7}, headers=as_(bob))
    assert saved.status_code == 200, saved.text
    versions = world.get(f"{BASE}/{kb}/versions", headers=as_(world.keys["viewer"])).json()
    admin_id = next(k.id for k in world.app.state.runtime.keys.list("acme") if k.role == "admin" and not k.user)  # made version 1
    assert [(v["version"], v["author"]) for v in versions] == [(2, "user:bob"), (1, f"key {admin_id}")]
    assert all(v["createdOn"].startswith("20") for v in versions)
    assert world.get(f"{BASE}/{kb}/versions").status_code == 401
    page = world.get(f"/ui/kbs/{kb}", headers=as_(world.keys["viewer"]))
    assert "by user:bob" in page.text and bob not in page.text
