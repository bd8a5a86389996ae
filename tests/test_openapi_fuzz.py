"""`schemathesis run --checks all` against a real `eddi-rag serve` on 127.0.0.1 (issue 12): every
operation of the OpenAPI document, a fixed seed and a bounded number of examples, 0 failures. Generated
requests go to this server only; its outbound guard allows no private network. The run takes about a
minute on its own: conftest starts it when the tests are collected, in a process of its own (once per test
command: ``python -m tests.test_openapi_fuzz``), so it runs beside them."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from eddi_rag.api.app import create_app
from eddi_rag.api.limits import Limits
from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.runtime import Runtime
from tests.support import once
from tests.support.ports import free_port
from tests.support.serving import wait_until_healthy

pytestmark = [pytest.mark.integration, pytest.mark.fuzz]

CONFIG = Path(__file__).parent / "support" / "schemathesis.toml"
ROOT = Path(__file__).resolve().parents[1]


def schemathesis(folder: Path) -> int:
    """Serve a fresh data folder (a key, a KB, a document) and run schemathesis at it; its exit code."""
    with Runtime(folder) as runtime:
        _, secret = runtime.keys.create("default", "admin", name="schemathesis")  # auth on from the start
        kb = runtime.resources.create("rags", {"name": "fuzzed", "embeddingProvider": "local", "storeType": "sqlite"}).id
        runtime.ingest(kb, "trains.md", "# Trains\n\nThe night train to Vienna leaves at 22:10.")
    env = {k: v for k, v in os.environ.items() if k != "EDDI_RAG_OUTBOUND_ALLOW"}  # no private network
    env.update(EDDI_RAG_RATE_LIMIT_QUERY="none", EDDI_RAG_RATE_LIMIT_INGEST="none", EDDI_RAG_MAX_CONCURRENT="1000",
               EDDI_VAULT_MASTER_KEY="the fuzzed server's vault key")  # the vault on: its operations answer, not 503
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(port), "--data-dir", str(folder),
                               "--log-format", "text"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until_healthy(f"http://127.0.0.1:{port}", server)
        # a process's first /providers imports every backend (seconds, more beside the other tests):
        # done once before the run, whose requests time out after 10 s
        import httpx

        httpx.get(f"http://127.0.0.1:{port}/providers", headers={"Authorization": f"Bearer {secret}"}, timeout=300)
        st = shutil.which("st", path=str(Path(sys.executable).parent))
        assert st, "schemathesis is in the dev extra: scripts/setup installs it"
        return subprocess.run(
            [st, "--no-color", "--config-file", str(CONFIG), "run", f"http://127.0.0.1:{port}/openapi.json", "--checks", "all",
             "--max-examples", "10", "--seed", "1", "-H", f"Authorization: Bearer {secret}"],
            timeout=900, env={**env, "EDDI_RAG_FUZZ_KB": kb},
            cwd=folder).returncode  # its .schemathesis cache lands there: every run starts from nothing
    finally:
        server.terminate()
        server.wait(60)


def start_schemathesis() -> None:
    """Begin the run in a process of its own, once per test command (conftest starts it at collection)."""
    once.start("schemathesis", [sys.executable, "-m", "tests.test_openapi_fuzz"], cwd=ROOT)


def readable(report: str) -> str:
    """schemathesis's report with each long run of one character shortened: a failing case's reproduction can hold a
    body of 10,000 'a's, and the message's last 10,000 characters then held nothing else but the summary."""
    return re.sub(r"(.)\1{80,}", lambda run: f"{run.group(1) * 20}...[{len(run.group(0))} x {run.group(1)!r}]", report)


def test_schemathesis_finds_nothing():
    start_schemathesis()
    returncode, output = once.result("schemathesis", 900)
    report = readable(output)
    # from its first ERRORS or FAILURES section (each case with its request and response) to the summary
    first = min((at for at in (report.find(" ERRORS "), report.find(" FAILURES ")) if at >= 0), default=max(len(report) - 20000, 0))
    assert returncode == 0, report[first:][:20000]
    assert "Authentication failed" not in output  # every operation was reached with the key


# --- what schemathesis never sends: lone surrogates and control characters -----------------------

BAD_TEXT = {"NUL": "\x00", "a control character": "\x1b[31m", "a lone surrogate": "\ud800x"}


def _operations(spec: dict) -> list[tuple[str, str, dict]]:
    return [(method.upper(), path, op) for path, item in spec["paths"].items() for method, op in item.items()
            if method in ("get", "post", "put", "delete", "patch")]


def _string_properties(schema: dict) -> list[str]:
    return [name for name, prop in (schema.get("properties") or {}).items()
            if prop.get("type") == "string" or any(p.get("type") == "string" for p in prop.get("anyOf", []))]


def test_every_operation_refuses_surrogates_and_control_characters_naming_the_field(tmp_path):
    """Every string parameter (path, query) and every string property of every JSON body, of every
    operation of the OpenAPI document, holding NUL, an escape sequence or a lone surrogate: 400 naming
    the field, never a 5xx, never the value echoed, and nothing stored."""
    import json as jsonlib
    from urllib.parse import quote

    from fastapi.testclient import TestClient

    runtime = Runtime(tmp_path, outbound=OutboundPolicy())
    kb = runtime.resources.create("rags", {"name": "fuzzed", "embeddingProvider": "local", "storeType": "sqlite"}).id
    app = create_app(runtime, limits=Limits({"query": [], "ingest": []}, 1_000))
    tried = 0
    with TestClient(app, raise_server_exceptions=False) as client:
        spec = client.get("/openapi.json").json()
        components = spec.get("components", {}).get("schemas", {})
        before = client.get("/ragstore/rags/descriptors").json()
        for method, path, op in _operations(spec):
            params = [p for p in op.get("parameters", []) if (p.get("schema") or {}).get("type") == "string"]
            filled = path.replace("{id}", kb)
            body = ((op.get("requestBody") or {}).get("content") or {}).get("application/json", {}).get("schema", {})
            if "$ref" in body:
                body = components.get(body["$ref"].split("/")[-1], {})
            cases = [(p["in"], p["name"]) for p in params if p["in"] in ("query", "path")]
            cases += [("body", name) for name in _string_properties(body)]
            for where, name in cases:
                for label, bad in BAD_TEXT.items():
                    url, content = filled, None
                    if where == "path":
                        segment = quote(bad.encode("utf-8", "surrogatepass"), safe="")
                        url = path.replace("{" + name + "}", segment).replace("{id}", kb)
                        url = __import__("re").sub(r"\{[^}]+\}", "x", url)
                    else:
                        url = __import__("re").sub(r"\{[^}]+\}", "x", url)
                    if where == "query":
                        url += "?" + quote(name) + "=" + quote(bad.encode("utf-8", "surrogatepass"), safe="")
                    if where == "body":
                        content = jsonlib.dumps({name: bad}).encode()  # the JSON escape \ud800 is valid JSON
                    r = client.request(method, url, content=content,
                                       headers={"Content-Type": "application/json"} if content else {})
                    tried += 1
                    assert r.status_code < 500, (method, path, where, name, label, r.status_code, r.text[:300])
                    if where != "body" and label == "a lone surrogate":
                        continue  # a URL is percent-decoded as UTF-8 with replacement: no surrogate arrives
                    assert r.status_code == 400, (method, path, where, name, label, r.status_code, r.text[:300])
                    assert bad not in r.text and "\\ud800" not in r.text and "\\u001b" not in r.text, r.text[:300]
                    assert (name if where != "path" else "path") in r.json()["error"], r.json()
        assert client.get("/ragstore/rags/descriptors").json() == before  # nothing was written
    runtime.close()
    assert tried > 100


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="eddi-rag-schemathesis-") as data:
        sys.exit(schemathesis(Path(data)))
