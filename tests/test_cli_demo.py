"""The demo and the CLI, end to end, as a user runs them (separate processes)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.openai_server import OpenAIStandIn
from tests.support.waiting import ingestion_ended


def eddi_rag(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"} | (env or {})
    return subprocess.run([sys.executable, "-m", "eddi_rag.cli", *args], capture_output=True, text=True,
                          timeout=300, env=environment)


def in_process(*args: str) -> subprocess.CompletedProcess:
    """The same command run in this process (click's CliRunner): its exit status, stdout and stderr."""
    from click.testing import CliRunner

    from eddi_rag.cli import main

    result = CliRunner().invoke(main, list(args))
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


@pytest.fixture(scope="module")
def demo_output() -> str:
    result = eddi_rag("demo")  # as a fresh machine with no key runs it: the extractive answer, grounded
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_demo_asks_three_questions_and_shows_everything(demo_output):
    out = demo_output
    assert out.count("── Question ") == 3
    assert out.count("Answer (extractive: the context's sentences that cover the question, no language model):") == 3
    assert out.count("## Relevant Context:") == 3 and out.count("rag:trace:travel-answer = ") == 3
    assert out.count("rag:context:travel-answer = ") == 3
    assert out.count("## Search Results:") == 3 and "rag:httpcall:trace:travel-answer" in out
    assert "eddi://ai.labs.agent/agentstore/agents/travel-assistant?version=1" in out


def test_demo_retrieves_the_right_document_for_each_question(demo_output):
    sections = demo_output.split("── Question ")[1:]
    for section, expected in zip(sections, ["refunds.md", "baggage.md", "skymiles.md"]):
        trace = json.loads(section.split("rag:trace:travel-answer = ", 1)[1].split("\n  rag:context", 1)[0])
        assert {t["kb"] for t in trace} == {"Travel policies", "Loyalty program"}
        best = max((c for t in trace for c in t["chunks"]), key=lambda c: c["score"])
        assert best["source"] == expected, section[:2000]
        assert f"score={best['score']:.4f}  source={expected}" in section
        assert all(c["score"] >= t["minScore"] for t in trace for c in t["chunks"])


def test_demo_answers_offline_from_the_injected_sentences_with_their_labels(demo_output):
    answers = [section.split("Answer (extractive", 1)[1].split("\n", 1)[1] for section in demo_output.split("── Question ")[1:]]
    assert "non-refundable" in answers[0].lower() and "[Source 1]" in answers[0]
    assert all("[Source " in a for a in answers)
    assert "rag:citations:travel-answer" in demo_output  # the extractive labels are checked like any model's


@pytest.mark.integration
def test_demo_without_a_chat_model_shows_retrieval_only():
    result = eddi_rag("demo", "--llm", "none", "-q", "Can I cancel a Saver fare?")
    assert result.returncode == 0, result.stderr
    assert "No chat model (--llm none)" in result.stdout and "(no chat model)" in result.stdout


@pytest.mark.integration
def test_demo_answers_with_the_small_local_model_only_when_asked():
    """scripts/test installs SmolLM2 (scripts/local-llm); `--llm smollm2` answers with it, labelled, and
    prints the grounded extractive answer beside it."""
    result = eddi_rag("demo", "--llm", "smollm2", "-q", "Can I get my money back if I cancel a Saver fare?")
    assert result.returncode == 0, result.stderr
    label = "Answer (SmolLM2-135M-Instruct, a small local model (answers may be incomplete or wrong)):"
    assert label in result.stdout
    assert result.stdout.split(label, 1)[1].strip(), "an answer follows the label"
    extract = result.stdout.split("Extractive answer (the context's sentences that cover the question):", 1)[1]
    assert "non-refundable" in extract.lower() and "[Source 1]" in extract


@pytest.mark.integration
def test_demo_answers_with_a_configured_chat_model():
    with OpenAIStandIn(answer="Saver fares are non-refundable [1].") as server:
        result = eddi_rag("demo", "--llm", "openai", "--base-url", server.base_url, "-q", "Can I cancel a Saver fare?")
    assert result.returncode == 0, result.stderr
    assert "Saver fares are non-refundable [1]." in result.stdout
    (chat,) = server.calls("/chat/completions")
    assert "## Relevant Context:" in chat["json"]["messages"][0]["content"]


@pytest.mark.integration
def test_cli_load_ingest_query(tmp_path):
    data = str(tmp_path / "data")
    assert eddi_rag("load", "examples/workflows", "--data-dir", data).returncode == 0  # the command as a process once
    doc = tmp_path / "pets.md"
    doc.write_text("Small pets travel in the cabin in a carrier of up to 8 kg.\n\nLarger dogs travel in the hold.")
    result = in_process("ingest", "travel-policies", str(doc), "--data-dir", data)
    assert result.returncode == 0, result.stderr
    assert "ingested 1 document(s), 1 chunks, into travel-policies" in result.stdout
    result = in_process("query", "travel-policies", "Can my cat fly in the cabin?", "--data-dir", data, "--min-score", "0", "--json")
    assert result.returncode == 0, result.stderr
    hits = json.loads(result.stdout)
    assert hits[0]["source"] == "pets.md" and 0 <= hits[0]["score"] <= 1
    private = tmp_path / "mine.md"
    private.write_text("My cat Tiger flies with me in the cabin every summer.")
    assert in_process("ingest", "travel-policies", str(private), "--data-dir", data, "--user", "ann", "--ttl", "3600").returncode == 0
    for user, sees in (("ann", True), ("bob", False)):
        result = in_process("query", "travel-policies", "cat Tiger", "--data-dir", data, "--min-score", "0", "--json", "--user", user)
        assert ("mine.md" in [h["source"] for h in json.loads(result.stdout)]) is sees
    assert "removed 0 expired chunk(s) from travel-policies" in in_process("purge", "travel-policies", "--data-dir", data).stdout
    missing = in_process("query", "nope", "q", "--data-dir", data)
    assert missing.returncode != 0 and "not found" in missing.stderr


@pytest.mark.integration
def test_serve_answers_rest_calls(tmp_path):

    import httpx

    from tests.support.ports import free_port
    from tests.support.serving import wait_until_healthy

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(port), "--data-dir", str(tmp_path), "--load", "examples/workflows"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, server)
        job = httpx.post(f"{base}/ragstore/rags/travel-policies/ingest?documentName=pets.md",
                         content="Small pets travel in the cabin.", headers={"Content-Type": "text/markdown"}).json()
        status_url = f"{base}/ragstore/rags/travel-policies/ingestion/{job['ingestionId']}/status"
        assert ingestion_ended(httpx, status_url)["status"] == "completed"
        results = httpx.post(f"{base}/ragstore/rags/travel-policies/query", json={"query": "Can my cat travel in the cabin?"}).json()["results"]
        assert results[0]["source"] == "pets.md"
        descriptors = httpx.get(f"{base}/agentstore/agents/descriptors").json()
        assert descriptors[0]["resource"] == "eddi://ai.labs.agent/agentstore/agents/travel-assistant?version=1"
        # a second server on the same folder is refused, saying what is supported (it started without a word)
        second = subprocess.run([sys.executable, "-m", "eddi_rag.cli", "serve", "--port", str(free_port()), "--data-dir",
                                 str(tmp_path)], capture_output=True, text=True, timeout=120)
        assert second.returncode != 0 and f"pid {server.pid}" in second.stderr and "one server per data directory" in second.stderr
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.integration
def test_doctor_checks_every_kb_and_prints_fixes(tmp_path):
    from eddi_rag.runtime import Runtime

    data = tmp_path / "data"
    rt = Runtime(data)
    good = rt.resources.create("rags", {"name": "good", "embeddingProvider": "local", "storeType": "sqlite"}, id="good")
    rt.ingest(good.id, "a.md", "Some text.")
    rt.resources.create("rags", {"name": "nokey", "embeddingProvider": "openai",
                                 "embeddingParameters": {"apiKey": "${env:EDDI_DOCTOR_MISSING}"}}, id="nokey")
    rt.resources.create("rags", {"name": "down", "embeddingProvider": "local", "storeType": "pgvector",
                                 "storeParameters": {"url": "postgresql://u@/db?host=/nonexistent"}}, id="down")
    # A store built with another model: 3-d vectors where the local model gives 384-d.
    odd = rt.resources.create("rags", {"name": "odd", "embeddingProvider": "local", "storeType": "sqlite"}, id="odd")
    from eddi_rag.stores.base import Chunk
    rt.stores.get(odd.id, rt.rag_config(odd.id)).upsert([Chunk("x", "t", {}, [1.0, 0.0, 0.0])])
    rt.close()
    result = eddi_rag("doctor", "--data-dir", str(data))
    out = result.stdout
    assert result.returncode == 1, out
    assert "good (good)" in out and "all references resolve" in out
    assert "secret reference ${env:EDDI_DOCTOR_MISSING} is not set" in out and "set the environment variable" in out
    assert "start the store or fix storeParameters" in out
    assert "store holds 3-d vectors, model gives 384-d" in out
    assert "3 problem(s) found" in out


@pytest.mark.integration
def test_sigterm_to_the_server_an_operator_finds_stops_it_with_a_backlog(tmp_path):
    """Issue 56, finding 8: "the first SIGTERM to serve was ignored" with a backlog. Its cause: the warm parse processes
    were named eddi-rag-idle, so ``pgrep -n eddi-rag`` (the newest process so named) was one of them, and the SIGTERM
    stopped it (a fresh one took its place) instead of the server. With PDFs waiting, the only process named eddi-rag is
    the server, and one SIGTERM to it shuts it down, giving the running job back."""
    import signal

    import httpx
    import psutil

    from tests.support import files
    from tests.support.ports import free_port
    from tests.support.serving import wait_until_healthy
    from tests.support.waiting import until

    port = free_port()
    command = str(Path(sys.executable).parent / "eddi-rag")  # as an operator starts it (its process is named eddi-rag)
    server = subprocess.Popen([command, "serve", "--port", str(port), "--data-dir", str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(base, server)
        kb = httpx.post(f"{base}/ragstore/rags", json={"name": "backlog", "embeddingProvider": "local",
                                                       "storeType": "sqlite"}).headers["Location"].split("/")[-1].split("?")[0]
        pdf = files.pdf(["The night train to Vienna leaves at 22:10 from platform 4. " * 40] * 3)
        with httpx.Client() as client:
            for i in range(40):  # a backlog: parse processes started and kept warm while it is worked off
                assert client.post(f"{base}/ragstore/rags/{kb}/ingest", params={"documentName": f"d{i}.pdf"}, content=pdf,
                                   headers={"Content-Type": "application/pdf"}).status_code == 202
        me = psutil.Process(server.pid)
        until(lambda: me.children(recursive=True), "a warm parse process")
        tree = [me, *me.children(recursive=True)]  # (other tests' servers may run beside: this one's tree alone)
        assert [p.pid for p in tree if "eddi-rag" in p.name()] == [server.pid], [(p.pid, p.name()) for p in tree]
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=90)  # (a bound on a hang, not a speed: it took under 2 s here)
        assert "Shutting down" in server.stdout.read()
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=30)


@pytest.mark.integration
def test_a_command_ends_without_the_interpreter_s_teardown_and_loses_nothing(tmp_path):
    """Issue 60, point 2: the program skips the interpreter's teardown once a command has ended (0.13-0.2 s of each),
    after what the interpreter would do first: threads joined, exit handlers run, output flushed. Its status is the
    command's; its whole output reaches a pipe; an exit handler registered by anyone runs."""
    program = ("import atexit, sys\n"
               "from eddi_rag import cli\n"
               "atexit.register(lambda: print('the exit handler ran', file=sys.stderr))\n"
               "sys.argv = ['eddi-rag', *sys.argv[1:]]\n"
               "cli.main()\n")
    ok = subprocess.run([sys.executable, "-c", program, "--help"], capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0 and ok.stdout.splitlines()[-1].lstrip().startswith("worker"), ok.stdout  # (all of it)
    assert "the exit handler ran" in ok.stderr
    failed = subprocess.run([sys.executable, "-c", program, "query", "nope", "anything", "--data-dir", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert failed.returncode == 1 and "rags/nope not found" in failed.stderr and "the exit handler ran" in failed.stderr
    wrong = subprocess.run([sys.executable, "-c", program, "no-such-command"], capture_output=True, text=True, timeout=120)
    assert wrong.returncode == 2 and "No such command" in wrong.stderr
