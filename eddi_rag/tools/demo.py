"""The offline demo: load examples/workflows, ingest examples/documents, ask questions through
the LlmTask hook, and show what an auditor would see."""

from __future__ import annotations

import ipaddress
import json
import re
import tempfile
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import click

from eddi_rag.answers import smollm2
from eddi_rag.answers.choice import chat_model
from eddi_rag.answers.extractive import ExtractiveChatModel, extractive_answer
from eddi_rag.answers.smollm2 import SmolLM2ChatModel
from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.runtime import Runtime
from eddi_rag.tools.bundle import load_bundle
from eddi_rag.workflow.llm_task import task_id
from eddi_rag.workflow.memory import ConversationMemory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
AGENT_ID = "travel-assistant"
NOTICES_PORT = 8765  # where examples/workflows/httpcalls/service-notices.json expects the stand-in (serve --demo-notices)
QUESTIONS = [
    "Can I get my money back if I cancel a Saver fare?",
    "How many checked bags are included in a Business fare, and how heavy may they be?",
    "How many miles do I earn on a Flex ticket, and when do they expire?",
]


@contextmanager
def notices_service(path: Path, port: int = 0):
    """A stand-in for the airline's live service-notice API (the httpCall RAG source)."""
    notices = json.loads(path.read_text(encoding="utf-8"))

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's naming
            url = urlparse(self.path)
            words = set(re.findall(r"[a-z]+", " ".join(parse_qs(url.query).get("q", [""])).lower()))
            found = [{k: n[k] for k in ("id", "title", "text")} for n in notices if words & set(n["keywords"])]
            body = json.dumps({"notices": found}).encode()
            self.send_response(200 if url.path == "/notices" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)  # (its stop waits one interval)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def describe(model) -> str:
    """What answers, as the demo labels it."""
    if isinstance(model, SmolLM2ChatModel):
        return smollm2.LABEL
    if isinstance(model, ExtractiveChatModel):
        return "extractive: the context's sentences that cover the question, no language model"
    return f"{getattr(model, 'model_name', None) or type(model).__name__}"


def _section(title: str) -> None:
    click.secho(f"\n── {title} " + "─" * max(0, 72 - len(title)), bold=True)


def run_demo(data_dir: str | None = None, llm: str | None = None, base_url: str | None = None,
             model: str | None = None, questions: list[str] | None = None) -> None:
    with tempfile.TemporaryDirectory(prefix="eddi-rag-demo-") as tmp, notices_service(EXAMPLES / "service-notices.json") as notices_url:
        # The stand-in notices service runs on loopback: the demo allows it (a server does not by default).
        runtime = Runtime(data_dir or tmp, outbound=OutboundPolicy((ipaddress.ip_network("127.0.0.0/8"),)))
        try:
            _run(runtime, notices_url, chat_model(llm, base_url, model, offline=True), questions or QUESTIONS)
        finally:
            runtime.close()


def _run(runtime: Runtime, notices_url: str, model, questions: list[str]) -> None:
    _section("1. Resources from examples/workflows")

    def point_at_stand_in(kind: str, id: str, data: dict) -> dict:
        # The httpCall config names the local notices stand-in started for this demo.
        return {**data, "targetServerUrl": notices_url} if kind == "httpcalls" else data

    for ref in load_bundle(runtime.saving, EXAMPLES / "workflows", point_at_stand_in):
        click.echo(f"  {ref.uri}")
    click.echo(f"  httpCall 'serviceNotices' → local stand-in at {notices_url}")

    _section("2. Ingest examples/documents")
    for kb_dir in sorted((EXAMPLES / "documents").iterdir()):
        config = runtime.knowledge_bases.get(kb_dir.name)
        for doc in sorted(kb_dir.glob("*.md")):
            n = runtime.ingesting.text(kb_dir.name, doc.name, doc.read_text(encoding="utf-8"))
            click.echo(f"  {config.name:<16} {doc.name:<14} {n:>3} chunks  ({config.embeddingProvider} model → {config.storeType} store)")

    llm_config = runtime.catalog.read("llm", "travel-assistant")
    task = llm_config["tasks"][0]
    tid = task_id(task)
    if model is None:
        click.secho("\nNo chat model (--llm none): showing retrieval and the prompt only; no answers are generated.", fg="yellow")
    else:
        click.secho(f"\nAnswers by {describe(model)}.", fg="yellow")
    for i, question in enumerate(questions, 1):
        _section(f"Question {i}: {question}")
        memory = ConversationMemory(agent_id=AGENT_ID, user_input=question)
        turn = runtime.turns.run(memory, tid, model)
        click.secho("Retrieved chunks:", bold=True)
        for entry in memory.get(f"rag:trace:{tid}", []):
            if "error" in entry:
                click.echo(f"  {entry['kb']}: ERROR {entry['error']}")
                continue
            click.echo(f"  {entry['kb']} (maxResults={entry['maxResults']}, minScore={entry['minScore']}): {entry['retrievedCount']} chunk(s)")
            for c in entry["chunks"]:
                click.echo(f"    score={c['score']:.4f}  source={c['source']}  id={c['id']}")
        click.secho("System message:", bold=True)
        click.echo("\n".join("  │ " + line for line in turn.system_message.splitlines()))
        click.secho("Memory entries:", bold=True)
        for key in (f"rag:trace:{tid}", f"rag:context:{tid}", f"rag:httpcall:trace:{tid}"):
            if key in memory.data:
                click.echo(f"  {key} = {json.dumps(memory.data[key], indent=2, ensure_ascii=False)}")
        for key in (f"rag:citations:{tid}", f"rag:miss:{tid}"):
            if key in memory.data:
                click.echo(f"  {key} = {json.dumps(memory.data[key], ensure_ascii=False)}")
        click.secho(f"Answer ({describe(model)}):" if model is not None else "Answer:", bold=True)
        click.echo("\n".join("  " + line for line in turn.answer.splitlines()) if turn.answer is not None else "  (no chat model)")
        if isinstance(model, SmolLM2ChatModel):  # beside a model this small, what the context says word for word
            click.secho("Extractive answer (the context's sentences that cover the question):", bold=True)
            click.echo("  " + extractive_answer(turn.system_message, question))
