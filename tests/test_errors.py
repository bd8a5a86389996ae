"""One error base: every error the product raises for a caller is an EddiRagError carrying its status,
and REST, MCP and the CLI each map it in one place."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

import eddi_rag
from eddi_rag.errors import EddiRagError

# Raised and caught inside the product; never a caller's answer.
INTERNAL = {"ParseCancelledError", "SignInRequired", "AuditorsPage", "PageGoneError"}  # caught where raised
SKIP_MODULES = ("eddi_rag.testing", "eddi_rag.ingest.parsing")  # pytest plugin; the parse process's entry point


def product_errors() -> dict[str, type[BaseException]]:
    found = {}
    for info in pkgutil.walk_packages(eddi_rag.__path__, "eddi_rag."):
        if info.name.startswith(SKIP_MODULES):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra not installed
            continue
        for name, value in vars(module).items():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == info.name \
                    and not name.startswith("_"):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_product_error_has_one_base_and_a_status():
    errors = product_errors()
    assert len(errors) > 30
    loose = [name for name, cls in errors.items() if not issubclass(cls, EddiRagError) and cls.__name__ not in INTERNAL]
    assert loose == []
    assert all(400 <= cls.status < 600 for cls in errors.values() if issubclass(cls, EddiRagError))


def test_rest_answers_a_product_error_with_its_status_and_a_bug_without_its_text(runtime):
    from eddi_rag.api.app import create_app

    app = create_app(runtime)

    @app.get("/boom")
    def boom():
        raise RuntimeError("secret detail sk-123")

    client = TestClient(app, raise_server_exceptions=False)
    r = client.post("/ragstore/rags/nope/query", json={"query": "x"})
    assert (r.status_code, r.json()) == (404, {"error": "rags/nope not found"})
    r = client.get("/boom")
    assert r.status_code == 500 and "sk-123" not in r.text and r.json()["error"].startswith("internal error (logged as ")


@pytest.mark.integration
def test_cli_maps_a_product_error_to_its_message(tmp_path):
    from eddi_rag.cli import main

    r = CliRunner().invoke(main, ["query", "nope", "anything", "--data-dir", str(tmp_path)])
    assert r.exit_code == 1 and "Error: rags/nope not found" in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("name", ["SecretNotFoundError", "UnknownProviderError", "DimensionMismatchError"])
def test_a_stored_configuration_that_cannot_be_used_is_a_conflict(name):
    cls = next(c for n, c in product_errors().items() if n.endswith("." + name))
    assert cls.status == 409


def test_what_went_wrong_is_said_without_our_class_names():
    """Issue 58, finding 8: a source's failure began "UnresolvableHostError: …"; our errors' messages say what and why
    on their own, another library's keeps its kind, and OpenSSL's WRONG_VERSION_NUMBER gets its cause."""
    import ssl

    from eddi_rag.common.outbound import UnresolvableHostError
    from eddi_rag.errors import described

    assert described(UnresolvableHostError("source Mail: cannot resolve mail.example")) == "source Mail: cannot resolve mail.example"
    assert described(ConnectionRefusedError(111, "Connection refused")) == "ConnectionRefusedError: [Errno 111] Connection refused"
    assert "this port does not speak TLS" in described(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"))
    assert described(RuntimeError()) == "RuntimeError"
