"""Every core serving (issue 46, point 2): ``eddi-rag serve --processes 2`` over the embedded default is coherent. A
document written through one serving process is found by the next query through the other, a configuration saved
in one is what the other uses, and a delete through one is gone from the other; a knowledge base made with every
default (EDDI's ``in-memory`` store) is kept in the data directory and answers through either process.
Real ``serve`` processes on 127.0.0.1; a kept-alive connection
stays with the process that accepted it, so each client below talks to one process (``/health`` names it)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from tests.support.ports import free_port
from tests.support.serving import wait_until_healthy
from tests.support.waiting import held, ingestion_ended

BASE = "/ragstore/rags"
KB = {"name": "Policies", "embeddingProvider": "local", "storeType": "sqlite", "maxResults": 3}
# EDDI's documented knowledge base (docs/rag.md, "RagConfiguration"), with the offline model for its openai embeddings
EDDI_DOCUMENTED = {"name": "product-docs", "embeddingProvider": "local", "storeType": "in-memory", "storeParameters": {},
                   "chunkStrategy": "recursive", "chunkSize": 512, "chunkOverlap": 64, "maxResults": 5, "minScore": 0.6}


def serve(data_dir, processes: int) -> tuple[subprocess.Popen, str]:
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(port), "--data-dir", str(data_dir),
                               "--processes", str(processes)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return server, f"http://127.0.0.1:{port}"


def client_of_another_process(base: str, than: int) -> tuple[httpx.Client, int]:
    """A client whose kept-alive connection another serving process than ``than`` accepted."""
    for _ in range(200):
        client = httpx.Client(base_url=base, timeout=60)
        process = client.get("/health").json()["process"]
        if process != than:
            return client, process
        client.close()
    raise AssertionError(f"every connection of 200 went to process {than}")


@contextmanager
def two_processes(data_dir) -> Iterator[tuple[subprocess.Popen, tuple[httpx.Client, int], tuple[httpx.Client, int]]]:
    """``serve --processes 2`` and a client of each process: (server, (client, its process), (client, its process)); the
    server ended after (its output left in ``server.output``)."""
    server, base = serve(data_dir, 2)
    try:
        wait_until_healthy(base, server)
        one = httpx.Client(base_url=base, timeout=60)
        first = one.get("/health").json()["process"]
        other, second = client_of_another_process(base, first)
        try:
            yield server, (one, first), (other, second)
        finally:
            one.close()
            other.close()
    finally:
        server.terminate()
        server.output = server.communicate(timeout=60)[0]  # type: ignore[attr-defined]


def results(client: httpx.Client, kb: str, query: str) -> list[dict]:
    r = client.post(f"{BASE}/{kb}/query", json={"query": query})
    assert r.status_code == 200, r.text
    return r.json()["results"]


@pytest.mark.integration
def test_what_one_serving_process_writes_the_other_reads_at_once(tmp_path):
    with two_processes(tmp_path) as (server, (one, first), (other, second)):
        assert first != second and server.pid not in (first, second)
        for pid in (first, second):  # (pgrep eddi-rag finds the starting process alone: the one to stop)
            assert open(f"/proc/{pid}/comm").read().strip() == "ragserve"

        created = one.post(BASE, json=KB)
        assert created.status_code == 201, created.text
        kb = created.headers["location"].split("/")[-1].split("?")[0]
        assert other.get(f"{BASE}/{kb}").json()["name"] == "Policies"  # a configuration saved in one, read by the other

        for name, text in (("pets.md", "Small pets travel in the cabin in a carrier."),
                           ("bags.md", "Each traveller may check two bags of 23 kg."),
                           ("meals.md", "Vegetarian meals are served on flights over three hours.")):
            job = one.post(f"{BASE}/{kb}/ingest", params={"documentName": name, "replace": "true"}, content=text.encode(),
                           headers={"Content-Type": "text/markdown"}).json()
            assert ingestion_ended(other, f"{BASE}/{kb}/ingestion/{job['ingestionId']}/status")["status"] == "completed"
        assert results(other, kb, "Can my cat come along in the cabin?")[0]["source"] == "pets.md"
        assert results(one, kb, "Can my cat come along in the cabin?")[0]["source"] == "pets.md"

        # the configuration changed through the other process: the first one answers by it
        put = other.put(f"{BASE}/{kb}", params={"version": 1}, json={**KB, "maxResults": 1})
        assert put.status_code == 200, put.text
        assert len(results(one, kb, "luggage allowance and meals")) == 1

        # a document replaced and one deleted through the first: gone from the other's answers at once
        job = one.post(f"{BASE}/{kb}/ingest", params={"documentName": "pets.md", "replace": "true"},
                       content=b"Pets travel in the hold only.", headers={"Content-Type": "text/markdown"}).json()
        assert ingestion_ended(one, f"{BASE}/{kb}/ingestion/{job['ingestionId']}/status")["status"] == "completed"
        found = results(other, kb, "Can my cat come along in the cabin?")[0]
        assert found["source"] == "pets.md" and "hold" in found["text"], found
        assert one.delete(f"{BASE}/{kb}/documents/bags.md").status_code == 200
        assert all(r["source"] != "bags.md" for r in results(other, kb, "How many bags can I check?"))

        # (issue 67, point 1) a knowledge base with every default but the offline model, and EDDI's documented example
        # (docs/rag.md: "storeType": "in-memory", its openai embeddings aside): written through one, read through the other
        for made in ({"name": "first minute", "embeddingProvider": "local"}, EDDI_DOCUMENTED):
            saved = one.post(BASE, json=made)
            assert saved.status_code == 201 and saved.json()["warnings"] == [], saved.text
            kb = saved.headers["Location"].split("/")[-1].split("?")[0]
            job = one.post(f"{BASE}/{kb}/ingest", params={"version": 1, "documentName": "canteen.txt"},
                           content="Die Kantine öffnet werktags um 11:30 Uhr.".encode(), headers={"Content-Type": "text/plain"})
            assert job.status_code == 202, job.text
            assert ingestion_ended(other, f"{BASE}/{kb}/ingestion/{job.json()['ingestionId']}/status")["status"] == "completed"
            found = other.post(f"{BASE}/{kb}/query", json={"query": "Wann öffnet die Kantine?", "minScore": 0}).json()
            assert "11:30" in found["results"][0]["text"], found
    # (issue 60) forked from the starting process; (issue 67, point 4) once it has imported what answers /health, not
    # every router and library first, and without waiting for the model's session once its graph is on disk
    # (test_model_cache)
    said = "2 serving processes, forked from this process once it had imported what answers /health"
    assert said in server.output, server.output


def mapped_bases(pid: int) -> set[str]:
    """The graph files process ``pid`` maps."""
    with open(f"/proc/{pid}/maps") as maps:
        return {line.split()[-1] for line in maps if line.rstrip().endswith(".faiss")}


@pytest.mark.integration
def test_the_processes_map_one_base_and_a_write_is_found_while_a_new_one_is_saved(tmp_path, monkeypatch):
    """Issue 60, point 1: the serving processes map the knowledge base's saved graph, one file (its vectors one copy in
    memory, whatever the number of processes); while a process on the same files (this test's) is saving a new base
    (held in the middle), a document written through one serving process is found by the next query through the
    other, and a replaced one is gone."""
    import threading

    import numpy as np

    from eddi_rag.runtime import Runtime
    from eddi_rag.stores.base import Chunk
    from eddi_rag.stores.embedded.ann import Hnsw

    rng = np.random.default_rng(60)
    vectors = rng.standard_normal((3040, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    filler = [Chunk(f"f{i}", f"filler number {i}", {"document_id": f"filler{i // 10}", "source": f"filler{i // 10}.md"},
                    v.tolist()) for i, v in enumerate(vectors)]
    with Runtime(tmp_path) as rt:
        kb = rt.resources.create("rags", {**KB, "storeParameters": {"index": "hnsw"}}).id
        store = rt.stores.get(kb, rt.rag_config(kb))
        store.upsert(filler[:3000])
        store.search(filler[0].vector, 1)  # the graph built and saved: the base
        base = store._cache.table.hnsw.path

        with two_processes(tmp_path) as (server, (one, first), (other, second)):
            for client in (one, other):
                results(client, kb, "warm up")  # each process reads the knowledge base: it maps the base
            assert mapped_bases(first) == mapped_bases(second) == {str(base)}

            store.upsert(filler[3000:])  # rows after the base here; a new base begins to be saved, held in the middle
            saving, go_on = held(monkeypatch, Hnsw, "save")
            worker = threading.Thread(target=store._save_base, args=(store._cache,))
            worker.start()
            assert saving.wait(60)
            for name, text in (("pets.md", "Small pets travel in the cabin in a carrier."), ("filler0.md", "Meals are served.")):
                job = one.post(f"{BASE}/{kb}/ingest", params={"documentName": name, "replace": "true"}, content=text.encode(),
                               headers={"Content-Type": "text/markdown"}).json()
                assert ingestion_ended(one, f"{BASE}/{kb}/ingestion/{job['ingestionId']}/status")["status"] == "completed"
            found = results(other, kb, "Can my cat come along in the cabin?")
            assert found[0]["source"] == "pets.md", found
            assert not [r for r in results(other, kb, "filler number 3") if r["text"].startswith("filler number")
                        and r["source"] == "filler0.md"]
            assert worker.is_alive()  # (all of it while the new base was being saved)
            go_on.set()
            worker.join(60)
            assert store.search(filler[3039].vector, 1)[0].id == "f3039"  # (this process reads what the others wrote)
            assert store._cache.table.hnsw.path != base and store._cache.table.delta_rows() > 0  # their writes: after it
            assert results(other, kb, "Can my cat come along in the cabin?")[0]["source"] == "pets.md"


@pytest.mark.integration
def test_a_wrong_way_to_start_the_processes_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("EDDI_RAG_PROCESS_START", "clone")
    server, _ = serve(tmp_path, 2)
    out, _ = server.communicate(timeout=120)
    assert server.returncode != 0 and "EDDI_RAG_PROCESS_START='clone': use fork or spawn" in out, out


@pytest.mark.integration
def test_several_processes_serve_a_knowledge_base_made_in_memory_before_with_what_it_held(tmp_path):
    """Issue 67, point 1: a default ``serve`` refused to start over a knowledge base with EDDI's default store
    (``in-memory``); it is kept in the data directory, so a server started later with two processes answers from it."""
    from eddi_rag.runtime import Runtime

    with Runtime(tmp_path) as rt:
        rt.saving.create("rags", {"name": "scratch", "embeddingProvider": "local", "storeType": "in-memory"}, id="scratch")
        rt.ingest("scratch", "shuttle.md", "Le dernier bus de nuit part à 1 h 40 de la gare.")
    with two_processes(tmp_path) as (_, (one, _first), (other, _second)):
        for client in (one, other):
            found = client.post(f"{BASE}/scratch/query", json={"query": "À quelle heure part le dernier bus ?", "minScore": 0})
            assert "1 h 40" in found.json()["results"][0]["text"], found.text


def test_one_process_of_those_on_a_file_holds_the_scheduler_s_role_until_it_lets_go(tmp_path):
    from eddi_rag.state.sqlite import Database

    first, second = Database(tmp_path / "state.db"), Database(tmp_path / "state.db")  # (as two processes open it)
    assert first.leader("scheduler") and first.leader("scheduler")  # asked again every tick: still held
    assert not second.leader("scheduler")
    first.release("scheduler")
    assert second.leader("scheduler") and not first.leader("scheduler")
    second.close()  # (a process that ends lets go too)
    assert first.leader("scheduler")
    first.close()


def test_unless_told_serve_starts_a_process_per_core_that_memory_holds(tmp_path, monkeypatch):
    """Issue 60, point 1: ``--processes auto`` (the default) is one process per core, fewer when the memory available
    would not hold them; each choice says why. (Issue 67: a knowledge base on EDDI's in-memory store no longer makes it
    one: it is kept in the data directory.)"""
    from eddi_rag import runtime as runtime_module
    from eddi_rag.runtime import Runtime

    monkeypatch.setattr(runtime_module.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    with Runtime(tmp_path) as rt:
        monkeypatch.setattr(runtime_module, "_available_mb", lambda: 100_000.0)
        assert rt.processes_to_serve() == (4, "one per core, each about 150 MB beyond what they share")
        monkeypatch.setattr(runtime_module, "_available_mb", lambda: 400.0)
        assert rt.processes_to_serve() == (2, "4 cores; 400 MB available holds 2 at about 150 MB each beyond what they share")
        monkeypatch.setattr(runtime_module, "_available_mb", lambda: None)  # (not Linux: cores alone)
        assert rt.processes_to_serve()[0] == 4
        rt.resources.create("rags", {"name": "scratch", "embeddingProvider": "local", "storeType": "in-memory"}, id="scratch")
        assert rt.processes_to_serve()[0] == 4
    monkeypatch.setattr(runtime_module.os, "sched_getaffinity", lambda pid: {0})
    with Runtime(tmp_path / "other") as rt:
        assert rt.processes_to_serve() == (1, "one core")


@pytest.mark.integration
def test_serve_says_how_many_processes_it_chose(tmp_path):
    """... and (issue 67, point 2) with no master key set, that the vault's is this machine's, where, and how to move it."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "EDDI_VAULT_MASTER_KEY"}
    server = subprocess.Popen([sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(free_port()), "--data-dir",
                               str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    try:
        out = ""
        for line in server.stdout:  # type: ignore[union-attr]
            out += line
            if "Manager UI" in line:
                break
    finally:
        server.terminate()
        out += server.communicate(timeout=60)[0]
    cores = len(os.sched_getaffinity(0))
    said = f"{cores} serving process{'es' * (cores > 1)} (" if cores > 1 else "1 serving process (one core"
    assert said in out and "--processes N to choose)" in out, out
    assert f"vault: the master key is this machine's, in {tmp_path / 'vault-master.key'} (owner-only); to keep it in your " \
           "secret store, set EDDI_VAULT_MASTER_KEY to its content and delete the file" in out, out
    bad = subprocess.run([sys.executable, "-m", "eddi_rag.cli", "serve", "--processes", "many", "--data-dir", str(tmp_path)],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "'many': use auto or a number from 1 to 64" in bad.stderr, bad.stderr
