"""httpCall RAG: call a named HTTP endpoint and inject its answer, as EDDI does: the whole call (path, query
parameters, headers, body) is a template over the turn's data (``{userInput}``, ``{memory.current.input}``,
``{properties.<name>}``, ``{context.<name>}``, ``{userInfo.userId}``, ``{conversationInfo.conversationId}``:
EDDI's Qute expressions; a value that is not there renders as nothing), values substituted into the path
URL-encoded; the injected JSON is capped at ``maxRagContextChars`` with EDDI's marker."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.workflow.context import cap

if TYPE_CHECKING:  # (httpx at the first call, off a start's path)
    import httpx

log = logging.getLogger(__name__)

EXPRESSION = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*)\}")  # Qute's {a.b.c}


@dataclass
class HttpCallResult:
    name: str
    context: str | None  # None when nothing is injected (no call, non-2xx, error)


def find_call(configs: list[dict[str, Any]], name: str) -> tuple[str, dict[str, Any]] | None:
    """(targetServerUrl, call) of the first call named ``name`` among httpcalls configs."""
    for config in configs:
        for call in config.get("httpCalls") or []:
            if call.get("name") == name:
                return config.get("targetServerUrl", ""), call
    return None


def _lookup(data: dict[str, Any], path: str) -> Any:
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def fill(value: Any, data: dict[str, Any], encode: bool = False) -> Any:
    """``value`` with each ``{expression}`` replaced by the template data's value (in dicts and lists too)."""
    if isinstance(value, str):
        def one(m: re.Match[str]) -> str:
            text = _text(_lookup(data, m.group(1)))
            return quote(text, safe="") if encode else text
        return EXPRESSION.sub(one, value)
    if isinstance(value, dict):
        return {k: fill(v, data) for k, v in value.items()}
    if isinstance(value, list):
        return [fill(v, data) for v in value]
    return value


def resolved(value: Any, resolve: Callable[[str], str]) -> Any:
    """``value`` with each string's secret references (``${vault:…}``, ``${env:…}``) resolved by ``resolve``."""
    if isinstance(value, str):
        return resolve(value) if "${" in value else value
    if isinstance(value, dict):
        return {k: resolved(v, resolve) for k, v in value.items()}
    if isinstance(value, list):
        return [resolved(v, resolve) for v in value]
    return value


def call_for_context(configs: list[dict[str, Any]], name: str, data: str | dict[str, Any],
                     client: httpx.Client | None = None, max_chars: int | None = None,
                     resolve: Callable[[str], str] = lambda text: text) -> HttpCallResult:
    """``data``: the turn's template data (ConversationMemory.template_data), or just the user's input. ``resolve``: a
    string with its secret references resolved (a header's key sealed into the vault: verbs.sealing), before the
    turn's templates are filled."""
    data = data if isinstance(data, dict) else {"userInput": data}
    found = find_call(configs, name)
    if found is None:
        log.warning("httpCallRag %r: no httpCall of that name in the workflow", name)
        return HttpCallResult(name, None)
    base, call = resolved(found[0], resolve), resolved(found[1], resolve)
    request = call.get("request") or {}
    url = base.rstrip("/") + "/" + fill(request.get("path", ""), data, encode=True).lstrip("/")
    body = request.get("body")
    content: bytes | None
    if isinstance(body, (dict, list)):
        content = json.dumps(fill(body, data)).encode()
    else:
        content = fill(body, data).encode() if body else None
    headers = {k: str(v) for k, v in fill(request.get("headers") or {}, data).items()}
    if content is not None and "contentType" in request:
        headers.setdefault("Content-Type", request["contentType"])
    own = client is None
    client = client or OutboundPolicy.from_env().client(timeout=10)
    try:
        response = client.request(
            request.get("method", "GET").upper(),
            url,
            params={k: str(v) for k, v in fill(request.get("queryParams") or {}, data).items()},
            headers=headers,
            content=content,
        )
    finally:
        if own:
            client.close()
    if not 200 <= response.status_code < 300:
        log.warning("httpCallRag %r: HTTP %s, nothing injected", name, response.status_code)
        return HttpCallResult(name, None)
    payload: dict[str, Any] = {}
    if call.get("saveResponse", False):  # EDDI default
        try:
            payload["body"] = response.json()
        except ValueError:
            payload["body"] = response.text
    payload["httpCode"] = response.status_code
    return HttpCallResult(name, cap(json.dumps(payload, ensure_ascii=False), max_chars))
