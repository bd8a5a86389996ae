"""The state means the same on both its databases: each test runs on SQLite (the embedded default) and on
PostgreSQL (a fleet's), through the same Runtime. The whole suite runs on PostgreSQL with
EDDI_RAG_TEST_STATE=postgres ./scripts/test; these are the state's rules that CI checks on both every run:
versions and 409s, tenants, soft and permanent delete, search ignoring case, keys, feedback, variables, notes,
the embedding cache, migrations, and the jobs shared by several queues (one claim each, leases, attempts,
cancel and progress seen from another)."""

from __future__ import annotations

import threading
import time

import pytest

from eddi_rag import state
from eddi_rag.ingest.jobs import MAX_ATTEMPTS, IngestionQueue
from eddi_rag.resource_types import ResourceNotFoundError, VersionConflictError
from eddi_rag.runtime import Runtime
from eddi_rag.state.schema import NewerDatabaseError, open_state
from eddi_rag.state.sqlite import StateUnavailableError
from tests.support.services import own_schema
from tests.support.waiting import until


@pytest.fixture
def rt(state_url, tmp_path):
    with Runtime(tmp_path / "data", state_url=state_url) as runtime:
        yield runtime


def test_versions_conflicts_tenants_and_deletes(rt):
    ref = rt.resources.create("rags", {"name": "Handbook"}, tenant="acme")
    assert rt.resources.update("rags", ref.id, 1, {"name": "Handbook 2"}).version == 2
    with pytest.raises(VersionConflictError):
        rt.resources.update("rags", ref.id, 1, {"name": "stale"})
    assert rt.resources.read("rags", ref.id, 1) == {"name": "Handbook"}
    assert rt.resources.read("rags", ref.id) == {"name": "Handbook 2"}
    with pytest.raises(ResourceNotFoundError):
        rt.resources.read("rags", ref.id, tenant="other")
    assert [d.name for d in rt.resources.descriptors("rags", "handBOOK")] == ["Handbook 2"]  # search ignores case
    rt.resources.delete("rags", ref.id)  # soft: gone from reads, kept underneath
    with pytest.raises(ResourceNotFoundError):
        rt.resources.read("rags", ref.id)
    assert rt.db.query("SELECT deleted FROM resources WHERE id=?", (ref.id,))[0]["deleted"] == 1
    rt.resources.delete("rags", ref.id, permanent=True)
    assert rt.db.query("SELECT COUNT(*) AS n FROM resource_versions WHERE id=?", (ref.id,))[0]["n"] == 0


def test_keys_feedback_variables_notes_and_the_embedding_cache(rt):
    info, secret = rt.keys.create("acme", "viewer", user="ann", acts_for_users=False)
    assert rt.keys.authenticate(secret).user_id == "ann"
    rt.keys.revoke(info.id)
    with pytest.raises(Exception, match="revoked"):
        rt.keys.authenticate(secret)
    vote = rt.feedback.log.record("acme", "kb", "Why?", "c1", "down", comment="wrong page")  # (the table; the verb checks the chunk)
    assert rt.feedback.review("acme", vote.id, reviewed=True, note="fixed")["reviewed"] is True
    assert [f["question"] for f in rt.feedback.list("acme")] == ["Why?"]
    rt.variables.put("acme", "region", "eu-west")
    assert rt.variables.variables.substitute({"url": "${vars:region}"}, "acme") == {"url": "eu-west"}
    rt.notes.save("agent", "Ann likes trains", user_id="ann")
    rt.notes.save("agent", "shared note")
    assert {n["text"] for n in rt.notes.list("agent", "ann")} == {"Ann likes trains", "shared note"}
    assert {n["text"] for n in rt.notes.list("agent", "bob")} == {"shared note"}
    cache = rt.embeddings.vectors
    cache.put_many([("k1", b"\x00\x01"), ("k2", b"\x02")])
    cache.put_many([("k1", b"\x09")])  # a key written again keeps its latest vector
    assert cache.get_many(["k1", "k2", "k3"]) == {"k1": b"\x09", "k2": b"\x02"}


def test_the_vault_keeps_its_secrets_on_both(state_url, tmp_path, monkeypatch):
    """Envelope-encrypted secrets: stored, replaced, read by the resolver, re-encrypted under a new data key."""
    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "the tests' master key")
    with Runtime(tmp_path / "data", state_url=state_url) as rt:
        assert rt.vault.store("acme", "openai", "sk-first-0123456789")[0] is True
        assert rt.vault.store("acme", "openai", "sk-second-0123456789")[0] is False
        assert rt.resolver.resolve("${vault:openai}", "acme") == "sk-second-0123456789"
        assert rt.vault.rotate_dek("acme")["secretsReEncrypted"] == 1
    with Runtime(tmp_path / "data", state_url=state_url) as rt:  # another process of the fleet: the same salt and keys
        assert rt.resolver.resolve("${vault:openai}", "acme") == "sk-second-0123456789"
        assert [m["keyName"] for m in rt.vault.list("acme")] == ["openai"]


def test_migrations_run_once_and_a_newer_schema_is_refused(state_url, tmp_path):
    with Runtime(tmp_path / "data", state_url=state_url) as rt:
        assert state.version(rt.db) == state.LATEST
        with rt.db.transaction() as c:
            rt.db.set_schema_version(c, state.LATEST - 1)  # the last migration again: it finds its columns there
    with Runtime(tmp_path / "data", state_url=state_url) as rt:
        assert state.version(rt.db) == state.LATEST
        with rt.db.transaction() as c:
            rt.db.set_schema_version(c, state.LATEST + 1)
    db = open_state(state_url, tmp_path / "data", "eddi-rag.db")
    with pytest.raises(NewerDatabaseError):
        state.migrate(db)
    db.close()


def test_a_job_is_claimed_once_however_many_queues_look(state_url, tmp_path):
    db = open_state(state_url, tmp_path, "eddi-rag.db")
    ran: list[str] = []
    lock = threading.Lock()

    def run(kb, version, document, name, body, fmt, progress):
        with lock:
            ran.append(document)
        return 1

    queues = [IngestionQueue(db, run, lease_seconds=30) for _ in range(4)]
    jobs = [queues[0].submit("kb", 1, f"d{i}", b"x") for i in range(40)]
    for q in queues:
        q.start()
    try:
        assert all(q.wait_idle(60) for q in queues)
    finally:
        for q in queues:
            q.stop()
    assert sorted(ran) == sorted(f"d{i}" for i in range(40))  # each once
    assert {queues[1].status(j.id).status for j in jobs} == {"completed"}
    db.close()


def test_workers_run_documents_side_by_side_but_one_document_s_jobs_one_at_a_time_in_order(state_url, tmp_path):
    """Two workers: while a document's first job runs, another document's job runs beside it and the document's
    second job waits for the first; a re-embedding of a knowledge base runs alone in it."""
    db = open_state(state_url, tmp_path, "eddi-rag.db")
    gates = {name: threading.Event() for name in ("a1", "x1")}
    running: set[str] = set()
    log: list[tuple[str, str, set[str]]] = []  # (start|end, job, what else ran at its start)
    lock = threading.Lock()

    a1_started = threading.Event()

    def run(kb, version, document, name, body, fmt, progress):
        job = f"{document}{body.decode()}" if fmt != "reembed" else "reembed"
        if job == "b1":  # (the two workers claim a1, then b1; which of them reaches this line first is the threads' race)
            a1_started.wait(30)
        with lock:
            log.append(("start", job, set(running)))
            running.add(job)
            if job == "a1":
                a1_started.set()
        if job in gates:
            gates[job].wait(30)
        with lock:
            running.discard(job)
            log.append(("end", job, set()))
        return 1

    queue = IngestionQueue(db, run, lease_seconds=30, workers=2)
    assert queue.workers == 2
    queue.submit("kb", 1, "a", b"1")
    queue.submit("kb", 1, "a", b"2")
    queue.submit("kb", 1, "b", b"1")
    queue.start()
    try:
        until(lambda: ("end", "b1", set()) in log, "b's job to run beside a's first", 30)
        assert ("start", "a2") not in {(e, j) for e, j, _ in log}  # a's second job waits for its first
        gates["a1"].set()
        assert queue.wait_idle(30)
        starts = [(j, others) for e, j, others in log if e == "start"]
        assert [j for j, _ in starts] == ["a1", "b1", "a2"] and starts[1][1] == {"a1"}
        # a re-embedding waits for the knowledge base's running jobs, and runs alone there
        log.clear()
        queue.submit("k2", 1, "x", b"1")
        until(lambda: ("start", "x1", set()) in log, "x to start", 30)
        queue.submit("k2", 1, "(re-embed all documents)", b"", fmt="reembed")
        time.sleep(0.3)
        assert [j for e, j, _ in log if e == "start"] == ["x1"]
        gates["x1"].set()
        assert queue.wait_idle(30)
        assert [(e, j) for e, j, _ in log] == [("start", "x1"), ("end", "x1"), ("start", "reembed"), ("end", "reembed")]
    finally:
        for gate in gates.values():
            gate.set()
        queue.stop()
    db.close()


def test_a_job_whose_worker_died_is_taken_again_after_its_lease(state_url, tmp_path):
    db = open_state(state_url, tmp_path, "eddi-rag.db")
    holder = IngestionQueue(db, lambda *a: 1, lease_seconds=1)
    job = holder.submit("kb", 1, "doc", b"x")
    claimed = holder.claim()  # taken, then its worker "dies" (on another machine: no renewal, nothing known)
    assert claimed["id"] == job.id and claimed["attempts"] == 1
    db.execute("UPDATE ingestion_jobs SET owner='elsewhere:1:dead' WHERE id=?", (job.id,))
    other = IngestionQueue(db, lambda *a: 3, lease_seconds=1)
    assert other.claim() is None  # under its lease
    again = until(other.claim, "the lease to run out", 10)
    assert again["id"] == job.id and again["attempts"] == 2
    other.carry_out(again)
    assert other.status(job.id).status == "completed" and other.status(job.id).chunks == 3
    # a job that kept killing its workers gives up after MAX_ATTEMPTS
    bomb = other.submit("kb", 1, "bomb", b"x")
    db.execute("UPDATE ingestion_jobs SET attempts=? WHERE id=?", (MAX_ATTEMPTS, bomb.id))
    other.carry_out(other.claim())
    assert other.status(bomb.id).status == f"failed: gave up after {MAX_ATTEMPTS} attempts"
    db.close()


def test_a_job_that_lost_the_state_database_waits_and_is_not_counted(state_url, tmp_path):
    """The state database went away while a job ran (a restart; the fleet test does it for real): the job is given
    back as pending once the state answers again, its attempt not counted, and the next run completes it."""
    db = open_state(state_url, tmp_path, "eddi-rag.db")
    runs = []

    def run(kb, version, document, name, body, fmt, progress):
        runs.append(document)
        if len(runs) == 1:
            raise StateUnavailableError("the state database is out of reach (restarting or down)")
        return 2

    queue = IngestionQueue(db, run, lease_seconds=30)
    job = queue.submit("kb", 1, "doc", b"x")
    queue.carry_out(queue.claim())
    after = db.query("SELECT status, attempts, owner FROM ingestion_jobs WHERE id=?", (job.id,))[0]
    assert (after["status"], after["attempts"], after["owner"]) == ("pending", 0, None)
    queue.carry_out(queue.claim())
    assert queue.status(job.id).status == "completed" and len(runs) == 2
    db.close()


def test_cancel_and_progress_cross_between_queues(state_url, tmp_path):
    db = open_state(state_url, tmp_path, "eddi-rag.db")
    started, stopped = threading.Event(), threading.Event()

    def run(kb, version, document, name, body, fmt, progress):
        started.set()
        for done in range(1, 1000):
            progress.embedded(done, 1000)  # raises once the job is cancelled
            time.sleep(0.02)
        return 1

    worker = IngestionQueue(db, run, lease_seconds=1.5)
    replica = IngestionQueue(db, run, lease_seconds=1.5)  # another process's view: it runs nothing
    job = replica.submit("kb", 1, "long", b"x")
    worker.start()
    try:
        assert started.wait(30)
        seen = until(lambda: (s := replica.status(job.id)).progress and s.progress["done"] >= 2 and s,
                     "progress to reach the other queue", 10)
        assert seen.status == "processing" and seen.progress["phase"] == "embedding"
        assert replica.cancel(job.id).status == "cancelled"
        assert worker.wait_idle(10)  # the worker heard of it at its next renewal and stopped
        stopped.set()
    finally:
        worker.stop()
    assert replica.status(job.id).status == "cancelled"
    db.close()


@pytest.mark.integration
@pytest.mark.services
def test_a_fleet_refuses_knowledge_bases_other_machines_cannot_reach(postgres_url, tmp_path):
    from eddi_rag.config import ConfigValidationError
    from tests.test_cli_demo import in_process

    url = own_schema(postgres_url)
    with Runtime(tmp_path / "one", state_url=url) as rt:  # (a process on its own may keep one)
        rt.saving.create("rags", {"name": "local", "embeddingProvider": "local", "storeType": "sqlite"})
    for role in ("serve", "worker"):
        refused = in_process(role, "--state-url", url, "--data-dir", str(tmp_path / role), "--port", "0")
        assert refused.returncode == 1
        assert "storeType 'sqlite' keeps its data on one machine" in refused.stderr and "pgvector, qdrant" in refused.stderr
    with Runtime(tmp_path / "fleet", state_url=url, fleet=True) as fleet:
        with pytest.raises(ConfigValidationError) as saved:
            fleet.saving.create("rags", {"name": "kept here", "embeddingProvider": "local", "storeType": "in-memory"})
        assert saved.value.errors[0]["path"] == "$.storeType"
        assert fleet.saving.create("rags", {"name": "shared", "embeddingProvider": "local", "storeType": "pgvector",
                                            "storeParameters": {"url": postgres_url}}).version == 1


def test_readiness_says_what_the_process_is_and_whether_it_reaches_its_state(tmp_path):
    from fastapi.testclient import TestClient

    from eddi_rag.api.app import create_app
    from eddi_rag.api.worker import create_worker_app

    with Runtime(tmp_path / "a") as rt, TestClient(create_app(rt, worker=False)) as api:
        assert api.get("/health/ready").json() == {"role": "serve", "state": "sqlite", "worker": False, "scheduler": False,
                                                   "status": "ready"}
    with Runtime(tmp_path / "b") as rt, TestClient(create_worker_app(rt)) as worker:
        body = worker.get("/health/ready").json()
        assert body["status"] == "ready" and body["role"] == "worker" and body["worker"] is True
        assert worker.get("/metrics").status_code == 200 and worker.get("/ragstore/rags").status_code == 404
        rt.db.close()  # the state out of reach
        down = worker.get("/health/ready")
        assert down.status_code == 503 and down.json()["error"].startswith("state database")


@pytest.mark.integration
@pytest.mark.services
def test_a_fleet_starting_at_once_opens_its_new_schema_in_every_process(postgres_url):
    """Every process of a fleet started together creates the state's schema (CREATE SCHEMA IF NOT EXISTS races in
    PostgreSQL: the losers got a duplicate-key error and did not start)."""
    from eddi_rag.state.postgres import PostgresDatabase

    for _ in range(3):
        url = own_schema(postgres_url, "race")
        barrier, failures = threading.Barrier(8), []

        def open_state_at_once() -> None:
            barrier.wait()
            try:
                PostgresDatabase(url, max_size=1).close()
            except Exception as e:  # noqa: BLE001 - what the test counts
                failures.append(e)
        threads = [threading.Thread(target=open_state_at_once) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert failures == []
