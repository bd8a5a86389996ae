"""A local HTTP server that speaks OpenAI's REST format (/v1/embeddings, /v1/chat/completions).

It stands in for the paid API only: our code → the real openai/langchain-openai client → real
HTTP → this server. Embeddings are deterministic pseudo-random unit vectors derived from the text.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import numpy as np

from tests.support.wire import WireStandIn, fake_vector


class OpenAIStandIn(WireStandIn):
    def __init__(self, default_dimensions: int = 16, answer: str = "Stand-in answer [1]."):
        self.default_dimensions, self.answer = default_dimensions, answer
        super().__init__(self._route)

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def error_body(self, request: dict[str, Any]) -> Any:
        # Like the real API, a 401 names the key that was refused.
        key = request["headers"].get("authorization", "")[7:] or request["headers"].get("api-key", "")
        return {"error": {"message": f"Incorrect API key provided: {key}.", "type": "invalid_request_error"}}

    def _route(self, request: dict[str, Any]) -> tuple[int, Any]:
        path = request["path"].split("?")[0]
        if path.endswith("/embeddings"):
            return 200, self._embeddings(request["json"])
        if path.endswith("/chat/completions"):
            return 200, self._chat(request["json"])
        return 404, {"error": {"message": f"no route {path}"}}

    def _embeddings(self, body: dict) -> dict:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = body.get("dimensions") or self.default_dimensions
        data = []
        for i, text in enumerate(inputs):
            v = fake_vector(text if isinstance(text, str) else json.dumps(text), dims)
            emb = base64.b64encode(np.asarray(v, dtype=np.float32).tobytes()).decode() if body.get("encoding_format") == "base64" else v
            data.append({"object": "embedding", "index": i, "embedding": emb})
        return {"object": "list", "data": data, "model": body.get("model", "deployment"),
                "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}}

    def _chat(self, body: dict) -> dict:
        return {
            "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": self.answer}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }
