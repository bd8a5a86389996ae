"""httpCall RAG: call a named HTTP endpoint with the user's input and inject its answer."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from eddi_rag.outbound import OutboundPolicy

log = logging.getLogger(__name__)


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


def _fill(value: Any, user_input: str, encode: bool = False) -> Any:
    if isinstance(value, str):
        return value.replace("{userInput}", quote(user_input, safe="") if encode else user_input)
    if isinstance(value, dict):
        return {k: _fill(v, user_input) for k, v in value.items()}
    if isinstance(value, list):
        return [_fill(v, user_input) for v in value]
    return value


def call_for_context(
    configs: list[dict[str, Any]], name: str, user_input: str, client: httpx.Client | None = None
) -> HttpCallResult:
    found = find_call(configs, name)
    if found is None:
        log.warning("httpCallRag %r: no httpCall of that name in the workflow", name)
        return HttpCallResult(name, None)
    base, call = found
    request = call.get("request") or {}
    url = base.rstrip("/") + "/" + _fill(request.get("path", ""), user_input, encode=True).lstrip("/")
    body = request.get("body")
    content: bytes | None
    if isinstance(body, (dict, list)):
        content = json.dumps(_fill(body, user_input)).encode()
    else:
        content = _fill(body, user_input).encode() if body else None
    headers = {k: str(v) for k, v in _fill(request.get("headers") or {}, user_input).items()}
    if content is not None and "contentType" in request:
        headers.setdefault("Content-Type", request["contentType"])
    own = client is None
    client = client or OutboundPolicy.from_env().client(timeout=10)
    try:
        response = client.request(
            request.get("method", "GET").upper(),
            url,
            params={k: str(v) for k, v in _fill(request.get("queryParams") or {}, user_input).items()},
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
    return HttpCallResult(name, json.dumps(payload, ensure_ascii=False))
