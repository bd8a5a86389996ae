"""A fleet on the real thing (issue 23): one PostgreSQL, three ``eddi-rag serve --no-worker`` replicas and two
``eddi-rag worker``s, each a process of its own on loopback, a client spreading its requests over the replicas.

One test, in steps, because the fleet is the expensive part (five processes and a PostgreSQL of its own): 200
documents ingested through random replicas while one worker is killed with SIGKILL twice; 30 more while
PostgreSQL is stopped and started again (every route answers 503 with the reason meanwhile, every job completes);
a configuration saved on replica 1 used by a query on replica 3; a cron source ticking once per tick with two
workers; the scheduler's holder killed and the other worker taking over; a key revoked on one replica refused on
the others."""

from __future__ import annotations

import http.client
import random
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import httpx
import pytest

from eddi_rag.config import validate_rag_configuration
from eddi_rag.ingest.chunking import split_text
from eddi_rag.stores.pgvector import table_name
from tests.support.fleet import Fleet
from tests.support.services import postgres_server
from tests.support.waiting import until

pytestmark = [pytest.mark.timeout(900), pytest.mark.integration, pytest.mark.services]

BASE = "/ragstore/rags"
DOCUMENTS = 200  # (two kills of a worker holding a job, and left to do after each: 300 took 53 s alone here, 200 44 s)
REPLICAS = ("serve-1", "serve-2", "serve-3")
WORDS = ("harbour", "lantern", "orchard", "granite", "meadow", "copper", "willow", "summit", "ember", "falcon")


def document(i: int) -> str:
    """Document i: 1 to 3 paragraphs, each its own chunk (paragraph chunks of 200 characters)."""
    rng = random.Random(i)
    return "\n\n".join(f"Document {i}, part {p}: " + " ".join(rng.choice(WORDS) for _ in range(18)) + "."
                       for p in range(1 + i % 3))


@pytest.fixture
def fleet(loopback_allowed, tmp_path):
    """The fleet on a PostgreSQL of its own (it is stopped and started in the middle of the test)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "page.md").write_text("# Page\n\nThe fleet's scheduled source.")
    with postgres_server() as server:
        fleet = Fleet(server.uri, tmp_path, EDDI_RAG_JOB_LEASE_SECONDS="2", EDDI_RAG_SCHEDULER_SECONDS="0.5",
                      EDDI_RAG_FOLDER_ROOTS=str(tmp_path / "site"), EDDI_RAG_RATE_LIMIT_INGEST="100000/minute",
                      EDDI_RAG_STATE_TIMEOUT="2")
        fleet.server = server
        try:
            for name in REPLICAS:
                fleet.start("serve", name)
            for name in ("worker-1", "worker-2"):
                fleet.start("worker", name)
            fleet.wait_ready(*REPLICAS, "worker-1", "worker-2")
            yield fleet
        finally:
            fleet.close()


class Client:
    """Each request to a replica picked at random (a seeded choice: the run is the same every time)."""

    def __init__(self, fleet: Fleet):
        self.fleet, self.rng, self.http = fleet, random.Random(23), httpx.Client(timeout=60)

    def url(self, replica: str | None = None) -> str:
        return self.fleet.urls[replica or self.rng.choice(REPLICAS)]

    def request(self, method: str, path: str, replica: str | None = None, **kwargs) -> httpx.Response:
        return self.http.request(method, self.url(replica) + path, **kwargs)


def test_a_fleet_shares_one_state(fleet):
    client = Client(fleet)
    config = {"name": "fleet", "embeddingProvider": "local", "storeType": "pgvector",
              "storeParameters": {"url": fleet.postgres_url}, "chunkStrategy": "paragraph", "chunkSize": 200,
              "searchMode": "vector", "maxResults": 5, "minScore": 0}
    made = client.request("POST", BASE, json=config)
    assert made.status_code == 201, made.text
    kb = made.headers["location"].split("/")[-1].split("?")[0]

    a_kept_alive_connection_outlives_a_client_s_idle_time(fleet)
    ingested_while_a_worker_is_killed_twice(fleet, client, kb, validate_rag_configuration(config))
    ingested_through_a_database_restart(fleet, client, kb, validate_rag_configuration(config))
    saved_on_one_replica_used_by_another(client, kb, config)
    cron_ticks_once_and_the_scheduler_is_taken_over(fleet, client)
    revoked_on_one_replica_refused_on_all(client, kb)


def a_kept_alive_connection_outlives_a_client_s_idle_time(fleet: Fleet) -> None:
    """A replica keeps an idle connection open longer than a client keeps it in its pool (httpx: 5 s): uvicorn's 5 s
    closed it as the client sent an upload on it once ("Connection reset by peer", issue 46)."""
    host, port = fleet.urls[REPLICAS[0]].removeprefix("http://").rsplit(":", 1)
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        connection.request("GET", "/health")
        assert connection.getresponse().read() and connection.sock is not None
        kept = connection.sock
        time.sleep(6)  # idle longer than httpx keeps a connection, and than uvicorn kept it
        connection.request("GET", "/health")  # (closed by the server: http.client.RemoteDisconnected)
        assert connection.getresponse().status == 200 and connection.sock is kept
    finally:
        connection.close()


def ingested_while_a_worker_is_killed_twice(fleet: Fleet, client: Client, kb: str, config) -> None:
    def submit(i: int) -> str:
        r = client.request("POST", f"{BASE}/{kb}/ingest?documentName=doc-{i:03}.txt", content=document(i).encode())
        assert r.status_code == 202, r.text
        return r.json()["ingestionId"]

    with ThreadPoolExecutor(6) as pool:
        submitted = pool.map(submit, range(DOCUMENTS))
        killed = []
        for _ in range(2):  # worker-1 is killed while it holds a job, twice, and started again each time
            pid = fleet.pid("worker-1")
            until(lambda: fleet.state("SELECT 1 FROM ingestion_jobs WHERE status='processing' AND owner LIKE %s",
                                      (f"%:{pid}:%",)), "worker-1 to hold a job", every=0.02)
            fleet.kill("worker-1")
            killed.append(pid)
            fleet.start("worker", "worker-1")
            fleet.wait_ready("worker-1")
        ids = list(submitted)

    def all_completed() -> list | None:
        jobs = client.request("GET", f"{BASE}/{kb}/ingestions?limit=1000").json()
        assert not [j for j in jobs if j["status"].startswith("failed")], jobs
        return jobs if len(jobs) == DOCUMENTS and all(j["status"] == "completed" for j in jobs) else None

    jobs = until(all_completed, "every job to complete", 300, every=0.5)
    assert sorted(j["ingestionId"] for j in jobs) == sorted(ids)

    # what the killed worker held was taken again (its lease ran out), counted as a further attempt
    retaken = fleet.state("SELECT COUNT(*) FROM ingestion_jobs WHERE attempts > 1")[0][0]
    assert retaken >= 1, "no job was taken again after its worker was killed"
    documents = client.request("GET", f"{BASE}/{kb}/documents").json()["documents"]
    # (REST ingestions append, as EDDI's: each document's id is its name#its ingestion id)
    assert sorted(d["documentId"] for d in documents) == sorted(f"doc-{i:03}.txt#{job}" for i, job in enumerate(ids))
    counts = {d["documentId"].split("#")[0]: d["chunks"] for d in documents}
    assert counts == {f"doc-{i:03}.txt": len(split_text(document(i), config)) for i in range(DOCUMENTS)}
    twice = fleet.store(f"SELECT metadata->>'document_id', text, COUNT(*) FROM {table_name(kb)} "
                        "GROUP BY 1, 2 HAVING COUNT(*) > 1")
    assert twice == []
    stored = fleet.store(f"SELECT COUNT(*) FROM {table_name(kb)}")[0][0]
    assert sum(counts.values()) == stored == sum(1 + i % 3 for i in range(DOCUMENTS))  # (1-3 paragraphs each)


def ingested_through_a_database_restart(fleet: Fleet, client: Client, kb: str, config) -> None:
    """PostgreSQL (the state and the store) stopped while the workers embed and started again: while it is away
    every route answers 503 with the reason (within the client's timeout: nothing hangs), and afterwards every
    replica answers again, every job completes (none failed), each document's chunks exactly once."""
    batch = range(DOCUMENTS, DOCUMENTS + 30)
    ids = {}
    for i in batch:
        r = client.request("POST", f"{BASE}/{kb}/ingest?documentName=doc-{i:03}.txt", content=document(i).encode())
        assert r.status_code == 202, r.text
        ids[i] = r.json()["ingestionId"]
    until(lambda: fleet.state("SELECT 1 FROM ingestion_jobs WHERE status='processing'"), "a job to be worked on", every=0.02)
    fleet.server.stop()  # (PostgreSQL's fast shutdown: "terminating connection due to administrator command")
    away = httpx.Client(timeout=15)  # a hang past the state's timeout (2 s here) fails the test
    routes = (("GET", f"{BASE}/{kb}/ingestions?limit=1000", None), ("POST", f"{BASE}/{kb}/query", {"query": "harbour"}),
              ("GET", f"{BASE}/descriptors", None), ("GET", f"{BASE}/{kb}/documents", None),
              ("POST", f"{BASE}/{kb}/ingest?documentName=late.txt", None), ("GET", "/health/ready", None))
    for replica in REPLICAS:
        for method, path, body in routes if replica == "serve-1" else routes[:2]:
            r = away.request(method, fleet.urls[replica] + path, json=body,
                             content=b"late" if body is None and method == "POST" else None)
            assert r.status_code == 503, (replica, path, r.status_code, r.text)
            assert "state database" in r.json()["error"] or "store" in r.json()["error"], (path, r.text)
    fleet.server.start()
    back = time.monotonic()
    recovered = {}
    def ready(name: str) -> bool:
        try:
            return away.get(f"{fleet.urls[name]}/health/ready").status_code == 200
        except httpx.TransportError:
            return False

    for name in (*REPLICAS, "worker-1", "worker-2"):
        until(lambda: ready(name), f"{name} to recover", 60)  # noqa: B023 - called at once, in this turn
        recovered[name] = round(time.monotonic() - back, 2)
    print(f"recovered after PostgreSQL came back (s): {recovered}")
    for replica in REPLICAS:  # the first query of each (its store connection was dropped too) answers
        r = client.request("POST", f"{BASE}/{kb}/query", replica, json={"query": "harbour lantern"})
        assert r.status_code == 200 and r.json()["results"], r.text

    def ours_completed() -> list | None:
        jobs = [j for j in client.request("GET", f"{BASE}/{kb}/ingestions?limit=1000").json() if j["ingestionId"] in ids.values()]
        assert not [j for j in jobs if j["status"].startswith("failed")], jobs
        return jobs if len(jobs) == len(ids) and all(j["status"] == "completed" for j in jobs) else None

    until(ours_completed, "the jobs to complete through the restart", 180, every=0.5)
    attempts = dict(fleet.state("SELECT id, attempts FROM ingestion_jobs WHERE id = ANY(%s)", (list(ids.values()),)))
    print(f"attempts of the jobs through the restart: {sorted(attempts.values())}")
    listed = client.request("GET", f"{BASE}/{kb}/documents")
    assert listed.status_code == 200, listed.text
    documents = {d["documentId"]: d["chunks"] for d in listed.json()["documents"]}
    assert {f"doc-{i:03}.txt#{ids[i]}": len(split_text(document(i), config)) for i in batch}.items() <= documents.items()
    twice = fleet.store(f"SELECT metadata->>'document_id', text, COUNT(*) FROM {table_name(kb)} GROUP BY 1, 2 HAVING COUNT(*) > 1")
    assert twice == []
    assert fleet.store(f"SELECT COUNT(*) FROM {table_name(kb)}")[0][0] == sum(documents.values())


def saved_on_one_replica_used_by_another(client: Client, kb: str, config: dict) -> None:
    def query(replica: str) -> list:
        r = client.request("POST", f"{BASE}/{kb}/query", replica, json={"query": "harbour lantern orchard"})
        assert r.status_code == 200, r.text
        return r.json()["results"]

    assert len(query("serve-3")) == 5
    saved = client.request("PUT", f"{BASE}/{kb}?version=1", "serve-1", json={**config, "maxResults": 2})
    assert saved.status_code == 200, saved.text
    assert len(query("serve-3")) == 2  # the very next query on another replica uses version 2


def cron_ticks_once_and_the_scheduler_is_taken_over(fleet: Fleet, client: Client) -> None:
    # a daily cron whose fire time passed two minutes ago: it never fires by itself during the test, and each time
    # the scheduler's last look (as the state keeps it) is moved back before it, one tick is due
    fired = datetime.now(timezone.utc) - timedelta(minutes=2)
    made = client.request("POST", BASE, json={
        "name": "scheduled", "embeddingProvider": "local", "storeType": "pgvector", "storeParameters": {"url": fleet.postgres_url},
        "sources": [{"name": "site", "folder": {"path": str(fleet.folder / "site")}, "cron": f"{fired.minute} {fired.hour} * * *"}]})
    assert made.status_code == 201, made.text
    runs_url = f"{BASE}/{made.headers['location'].split('/')[-1].split('?')[0]}/sources/site/runs"

    def a_tick_is_due() -> None:  # (a look a minute before the fire time, however long the runs before took: "now
        # minus 4 minutes" was after the fire time once a slow machine's runs had taken over 2 minutes)
        last = (fired.replace(second=0, microsecond=0) - timedelta(minutes=1)).isoformat(timespec="milliseconds")
        fleet.state("UPDATE fleet_ticks SET last=%s WHERE name='scheduler'", (last,))

    def runs_after(count: int) -> list:
        try:
            until(lambda: len(runs := client.request("GET", runs_url).json()) >= count and runs[0]["status"] != "RUNNING",
                  f"{count} runs", 60, every=0.1)
        except AssertionError as e:  # (what the workers said, to see why)
            raise AssertionError(f"{e}; runs: {client.request('GET', runs_url).json()}; "
                                 + "; ".join(f"{w}: {fleet.log(w)[-1500:]}" for w in ("worker-1", "worker-2"))) from None
        time.sleep(3)  # six more looks of each worker: nothing else may start
        return client.request("GET", runs_url).json()

    holders = [name for name in ("worker-1", "worker-2") if fleet.ready(name)["scheduler"]]
    assert len(holders) == 1, holders  # one scheduler in the fleet
    for expected in (1, 2):
        a_tick_is_due()
        runs = runs_after(expected)
        assert len(runs) == expected and all(r["status"] == "COMPLETED" for r in runs), runs

    fleet.kill(holders[0])  # its advisory lock goes with its connection
    other = "worker-2" if holders[0] == "worker-1" else "worker-1"
    until(lambda: fleet.ready(other)["scheduler"], "the scheduler role to be taken over", 30, every=0.1)
    a_tick_is_due()
    runs = runs_after(3)
    assert len(runs) == 3 and all(r["status"] == "COMPLETED" for r in runs), runs


def revoked_on_one_replica_refused_on_all(client: Client, kb: str) -> None:
    admin = client.request("POST", "/keys", "serve-1", json={"role": "admin", "name": "fleet admin"}).json()["key"]
    viewer = client.request("POST", "/keys", "serve-2", json={"role": "viewer"}, headers={"Authorization": f"Bearer {admin}"}).json()
    as_viewer = {"Authorization": f"Bearer {viewer['key']}"}
    assert all(client.request("GET", f"{BASE}/{kb}/documents", r, headers=as_viewer).status_code == 200 for r in REPLICAS)
    revoked = client.request("DELETE", f"/keys/{viewer['id']}", "serve-1", headers={"Authorization": f"Bearer {admin}"})
    assert revoked.status_code == 200 and revoked.json()["revokedOn"]
    # at once, on every replica: no replica keeps keys in memory
    assert [client.request("GET", f"{BASE}/{kb}/documents", r, headers=as_viewer).status_code for r in REPLICAS] == [401] * 3
