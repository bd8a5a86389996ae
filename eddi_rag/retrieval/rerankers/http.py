"""Rerank APIs that share one shape: ``POST {baseUrl}/rerank`` with a bearer key and
``{model, query, documents, top_n|top_k}``, answering ``[{index, relevance_score}]`` under
``results`` (Cohere v2, Jina) or ``data`` (Voyage). Retries as the embedding providers do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from eddi_rag.embeddings import guard


@dataclass(frozen=True)
class Api:
    url: str
    model: str
    top: str  # the request field naming how many results to return
    results: str  # the response field holding them


APIS = {
    "cohere": Api("https://api.cohere.com/v2", "rerank-v3.5", "top_n", "results"),
    "jina": Api("https://api.jina.ai/v1", "jina-reranker-v2-base-multilingual", "top_n", "results"),
    "voyage": Api("https://api.voyageai.com/v1", "rerank-2", "top_k", "data"),
}


class HttpReranker:
    PARAMETERS = ("apiKey", "model", "baseUrl", "timeout")

    def __init__(self, kind: str, apiKey: str | None = None, model: str | None = None, baseUrl: str | None = None,
                 timeout: float = 30):
        if not apiKey:
            raise ValueError(f"rerankerParameters.apiKey is required for reranker {kind!r}")
        self.name, self.api = kind, APIS[kind]
        self.model = model or self.api.model
        self.url = (baseUrl or self.api.url).rstrip("/") + "/rerank"
        self.client = httpx.Client(timeout=float(timeout), headers={"Authorization": f"Bearer {apiKey}"})

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.client.post(self.url, json=body)
        response.raise_for_status()
        return response.json()

    def scores(self, query: str, documents: list[str]) -> list[float]:
        if not documents:
            return []
        body = {"model": self.model, "query": query, "documents": documents, self.api.top: len(documents)}
        answer = guard.retrying(f"{self.name} rerank")(self._post, body)
        rows = answer.get(self.api.results)
        if not isinstance(rows, list):
            raise ValueError(f"{self.name} rerank answered without a result list: {str(answer)[:200]}")
        scores = [float("-inf")] * len(documents)
        for row in rows:
            scores[int(row["index"])] = float(row["relevance_score"])
        return scores
