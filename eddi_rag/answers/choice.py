"""Which chat model answers (``--llm``, ``--base-url``, ``--model``), made now (``chat_model``) or at its first use
(``later``: what ``serve`` holds, since importing LangChain's chat models took about a second of every start)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any


def which(llm: str | None, base_url: str | None, offline: bool = False) -> str:
    """The chat model ``llm`` names; None: openai when a key or base URL is given, else (``offline``, the demo and
    ``serve``) the extractive answer, else none."""
    if llm is not None:
        return llm
    if os.environ.get("OPENAI_API_KEY") or base_url:
        return "openai"
    return "extractive" if offline else "none"


def chat_model(llm: str | None, base_url: str | None, model: str | None, offline: bool = False) -> Any:
    """A LangChain chat model, or None (``which``: none). The extractive answer is grounded in the context with its
    ``[Source n]`` labels; the small local model (SmolLM2) answers only when asked for (``smollm2``): it holds the fact
    in 15% of claude-docs-qa answers, the extractive answer in 38% (benchmarks/README.md)."""
    chosen = which(llm, base_url, offline)
    if chosen == "none":
        return None
    if chosen == "extractive":
        from eddi_rag.answers.extractive import ExtractiveChatModel

        return ExtractiveChatModel()
    if chosen == "smollm2":
        from eddi_rag.answers.smollm2 import SmolLM2ChatModel

        return SmolLM2ChatModel()
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(model=model or "gpt-4o-mini", base_url=base_url,
                      api_key=SecretStr(os.environ.get("OPENAI_API_KEY") or "no-key-needed-for-a-local-server"),
                      temperature=0, max_retries=1)


class Deferred:
    """A chat model made at its first use: every attribute is the model's (``invoke``, ``bind``...)."""

    def __init__(self, make: Callable[[], Any], chosen: str):
        self._make, self._model, self._lock = make, None, threading.Lock()
        self.chosen = chosen  # (``which``'s name: what answers, known before the model is made)

    def __getattr__(self, name: str) -> Any:
        with self._lock:
            if self._model is None:
                self._model = self._make()
        return getattr(self._model, name)


def later(llm: str | None, base_url: str | None, model: str | None, offline: bool = False) -> Deferred | None:
    """``chat_model``, made at its first use; None at once when none answers."""
    chosen = which(llm, base_url, offline)
    return None if chosen == "none" else Deferred(lambda: chat_model(llm, base_url, model, offline), chosen)


def is_extractive(model: Any) -> bool:
    """Whether ``model`` (made or ``Deferred``) is the extractive answer, no language model."""
    return getattr(model, "chosen", None) == "extractive" or type(model).__name__ == "ExtractiveChatModel"
