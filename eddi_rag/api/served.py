"""One of several serving processes (``eddi-rag serve --processes N``).

uvicorn starts each process afresh and builds its app by calling ``app`` here; what ``serve`` was told comes through
one environment variable (``SETTINGS``), written by the starting process. Every process has its own runtime over the
same state and stores, coherent through them: a document written through one is found by the next query through any
other (the ``sqlite`` store catches up from its log of changed chunks), a configuration saved in one is read by all.
Each runs ingestion jobs (a job is claimed by one, in one statement) and may hold the scheduler's role (one at a
time: ``state.sqlite.Database.leader``)."""

from __future__ import annotations

import json
import os
from typing import Any

SETTINGS = "EDDI_RAG_SERVE_SETTINGS"
NAME = "ragserve"  # what ps and pgrep show for a serving process


def settings(**values: Any) -> str:
    """``serve``'s options as the processes read them."""
    return json.dumps(values)


def app() -> Any:
    """A serving process's app, from ``SETTINGS``. The process ends with the one that started it (killed with it) and is
    named ``ragserve`` (``pgrep eddi-rag`` finds the starting one alone: the one to send SIGTERM to)."""
    from eddi_rag.common.lifetime import die_with_parent, name_process

    die_with_parent()
    name_process(NAME)
    from eddi_rag.api.app import create_app
    from eddi_rag.api.observability import log_requests
    from eddi_rag.common.outbound import OutboundPolicy
    from eddi_rag.runtime import Runtime
    from eddi_rag.verbs.turns import answering_model

    s = json.loads(os.environ[SETTINGS])
    outbound = OutboundPolicy.from_env().with_loopback() if s["loopback_allowed"] else None  # (--demo-notices)
    runtime = Runtime.serving(s["data_dir"], s["state_url"], outbound)  # (refusals: said by serve before)
    log_requests(s["log_format"])
    return create_app(runtime, max_upload_bytes=s["max_upload_bytes"], chat_model=answering_model(s["llm"], s["base_url"], s["model"], offline=True),
                      host=s["host"], worker=s["worker"], lazy=True, warm=default_model)


def default_model() -> None:
    """The default model's session made (at once when ``serve`` made it before forking this process; else from its
    optimised graph on disk: ``embeddings.optimized``), before the first query needs it."""
    from eddi_rag.embeddings import local

    try:
        local.default_session()
    except RuntimeError:  # (the model's package is missing: said when a knowledge base needs it)
        pass
