"""A local HTTP server that speaks OpenAI's REST format (/v1/embeddings, /v1/chat/completions).

It stands in for the paid API only: our code → the real openai/langchain-openai client → real
HTTP → this server, which records every request so tests can check what went over the wire.
Embeddings are deterministic pseudo-random unit vectors derived from the text.
"""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np


def fake_vector(text: str, dimensions: int) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(dimensions).astype(np.float32)
    return v / np.linalg.norm(v)


class OpenAIStandIn:
    def __init__(self, default_dimensions: int = 16, answer: str = "Stand-in answer [1]."):
        self.requests: list[dict] = []
        self.default_dimensions, self.answer = default_dimensions, answer
        self.fail_next: list[int] = []  # HTTP statuses to answer with before behaving normally
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                stand_in.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()}, "json": body})
                if stand_in.fail_next:
                    status = stand_in.fail_next.pop(0)
                    message = "stand-in failure"
                    if status == 401:  # like the real API, name the key that was refused
                        message = f"Incorrect API key provided: {self.headers.get('Authorization', '')[7:]}."
                    return self._send(status, {"error": {"message": message, "type": "invalid_request_error"}})
                if self.path.endswith("/embeddings"):
                    return self._send(200, stand_in._embeddings(body))
                if self.path.endswith("/chat/completions"):
                    return self._send(200, stand_in._chat(body))
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def _embeddings(self, body: dict) -> dict:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        dims = body.get("dimensions") or self.default_dimensions
        data = []
        for i, text in enumerate(inputs):
            v = fake_vector(text if isinstance(text, str) else json.dumps(text), dims)
            emb = base64.b64encode(v.tobytes()).decode() if body.get("encoding_format") == "base64" else v.tolist()
            data.append({"object": "embedding", "index": i, "embedding": emb})
        return {"object": "list", "data": data, "model": body["model"],
                "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}}

    def _chat(self, body: dict) -> dict:
        return {
            "id": "chatcmpl-standin", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": self.answer}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def calls(self, suffix: str) -> list[dict]:
        return [r for r in self.requests if r["path"].endswith(suffix)]

    def __enter__(self) -> OpenAIStandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
