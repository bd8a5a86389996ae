from __future__ import annotations

import inspect
import os

import pytest
from hypothesis import settings

from eddi_rag.embeddings.local import LocalOnnxEmbeddings
from eddi_rag.runtime import Runtime
from tests.support.openai_server import OpenAIStandIn

# Property tests are deterministic in the test command (the same examples every run: CI's outcome never
# depends on the run); what they once found stays as explicit cases (FILTERS in eddi_rag.testing).
# (eddi_rag.testing, which holds them, is imported after this file.) Fresh examples:
# EDDI_RAG_HYPOTHESIS=random ./scripts/test -k random
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True)
settings.register_profile("random", database=None, print_blob=True)
settings.load_profile(os.environ.get("EDDI_RAG_HYPOTHESIS", "deterministic"))


SERVICE_FIXTURES = {"redis_url", "typesense_params", "chroma_params", "postgres_url", "pgvector_params", "elasticsearch_params"}
SERVICE_BACKENDS = ("pgvector", "chroma", "typesense", "elasticsearch", "mongodb-atlas")  # conformance parameters
# what a test's own code names when it starts a process or serves on loopback
OTHER_PROCESSES = ("subprocess", "Popen", "sys.executable", "serving(", "StandIn", "openai_server", "site(", "site,", "redis",
                   "CliRunner", "run_demo", "chrome(")


def kinds(item) -> list[str]:
    """The markers a test gets: unit or integration, and what it needs (see pyproject's markers)."""
    path = item.path.name
    if path == "test_lint.py":
        return ["integration", "lint"]
    if path == "test_openapi_fuzz.py":
        return ["integration", "fuzz"]
    try:
        source = inspect.getsource(item.function)
    except (OSError, TypeError):
        source = ""
    needs = []
    if "chrome(" in source or "browser" in item.fixturenames:
        needs.append("browser")
    backend = item.callspec.params.get("make") if hasattr(item, "callspec") else None
    if SERVICE_FIXTURES & set(item.fixturenames) or (isinstance(backend, str) and backend.startswith(SERVICE_BACKENDS)):
        needs.append("services")
    fixtures = set(item.fixturenames)
    other = needs or any(word in source for word in OTHER_PROCESSES) or {"openai_server", "site"} & fixtures
    return ["integration", *needs] if other else ["unit"]


def pytest_collection_modifyitems(config, items):
    """Every test marked unit or integration (and services / browser / fuzz / lint: ``-m unit`` runs the
    in-process ones alone). mypy and schemathesis take a minute or more each, in processes of their own:
    when they are among the tests, they start now and run beside the others (their tests collect the results)."""
    for item in items:
        for kind in kinds(item):
            item.add_marker(kind)
    if any(item.nodeid.endswith("test_lint.py::test_mypy_finds_nothing") for item in items):
        from tests.test_lint import start_mypy

        start_mypy()
    if any(item.nodeid.endswith("test_openapi_fuzz.py::test_schemathesis_finds_nothing") for item in items):
        from tests.test_openapi_fuzz import start_schemathesis

        start_schemathesis()


@pytest.fixture(autouse=True, scope="session")
def loopback_allowed():
    """The tests' servers all run on 127.0.0.1: the outbound guard allows loopback here (a server
    allows no private network by default)."""
    before = os.environ.get("EDDI_RAG_OUTBOUND_ALLOW")
    os.environ["EDDI_RAG_OUTBOUND_ALLOW"] = "127.0.0.0/8"
    yield
    if before is None:
        os.environ.pop("EDDI_RAG_OUTBOUND_ALLOW", None)
    else:
        os.environ["EDDI_RAG_OUTBOUND_ALLOW"] = before


@pytest.fixture(autouse=True)
def quick_retries(monkeypatch):
    """Keep the real retry policy (3 attempts, exponential) but with millisecond waits."""
    from eddi_rag.embeddings import guard

    monkeypatch.setattr(guard, "BACKOFF_SECONDS", 0.001)


@pytest.fixture(scope="session")
def local_model() -> LocalOnnxEmbeddings:
    return LocalOnnxEmbeddings()


@pytest.fixture
def runtime(tmp_path):
    rt = Runtime(tmp_path / "data")
    yield rt
    rt.close()


@pytest.fixture
def client(tmp_path):
    """The REST API over a fresh runtime (FastAPI's test client: the real app, no port)."""
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app

    runtime = Runtime(tmp_path)
    with TestClient(create_app(runtime)) as c:
        yield c
    runtime.close()


@pytest.fixture
def openai_server():
    with OpenAIStandIn() as server:
        yield server


@pytest.fixture(scope="session")
def redis_url():
    from tests.support.services import redis

    with redis() as url:
        yield url


@pytest.fixture(scope="session")
def elasticsearch_params():
    """A real Elasticsearch when ES_URL is set; else the local stand-in speaking its REST API."""
    import os

    if os.environ.get("ES_URL"):
        yield {"url": os.environ["ES_URL"]}
        return
    from tests.support.elasticsearch_standin import ElasticsearchStandIn

    with ElasticsearchStandIn() as server:
        yield {"url": server.url}


@pytest.fixture(scope="session")
def typesense_params():
    from tests.support.services import typesense

    with typesense() as params:
        yield params


@pytest.fixture(scope="session")
def chroma_params():
    from tests.support.services import chroma

    with chroma() as params:
        yield params


@pytest.fixture(scope="session")
def postgres_url():
    from tests.support.services import postgres

    with postgres() as url:
        yield url


@pytest.fixture(scope="session")
def pgvector_params(postgres_url):
    return {"url": postgres_url}
