"""Rerankers: score (query, passage) pairs with a model that reads both, to reorder over-fetched
candidates. ``reranker`` on the RagConfiguration: ``none`` (default), ``cohere``, ``jina``,
``voyage`` (their rerank APIs, one shape), ``cross-encoder`` (a local ONNX cross-encoder and its
tokenizer.json, by path). No PyPI package we know of ships cross-encoder weights, so the offline
default stays ``none``.
"""

from __future__ import annotations

from typing import Any, Protocol

from eddi_rag.backends.factories import BoundedCache, cache_key
from eddi_rag.common.outbound import OutboundPolicy
from eddi_rag.common.secrets import SecretResolver, resolve_parameters
from eddi_rag.config import RagConfiguration

KINDS = ("none", "cohere", "jina", "voyage", "cross-encoder")


class Reranker(Protocol):
    name: str

    def scores(self, query: str, documents: list[str]) -> list[float]:
        """One relevance score per document, in the documents' order (higher is better)."""


def build(kind: str, params: dict[str, Any]) -> Reranker | None:
    """The reranker for ``kind`` with resolved ``params``; None for ``none``."""
    if kind == "none":
        return None
    if kind == "cross-encoder":
        from eddi_rag.retrieval.rerankers.cross_encoder import CrossEncoderReranker

        return CrossEncoderReranker(**_known(kind, params, CrossEncoderReranker.PARAMETERS))
    from eddi_rag.retrieval.rerankers.http import APIS, HttpReranker

    if kind not in APIS:
        raise ValueError(f"reranker {kind!r} is not supported; use one of {', '.join(KINDS)}")
    return HttpReranker(kind, **_known(kind, params, HttpReranker.PARAMETERS))


def _known(kind: str, params: dict[str, Any], allowed: tuple[str, ...]) -> dict[str, Any]:
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"rerankerParameters.{unknown[0]} is not a parameter of reranker {kind!r}; "
                         f"known: {', '.join(allowed)}")
    return params


class RerankerFactory:
    """One reranker per (kind, parameters): a cross-encoder's ONNX session loads once."""

    def __init__(self, resolver: SecretResolver | None = None, outbound: OutboundPolicy | None = None, **cache_args: Any):
        """``outbound``: which endpoints a reranker API may be pointed at (default: EDDI_RAG_OUTBOUND_ALLOW)."""
        self.resolver = resolver or SecretResolver()
        self.outbound = outbound or OutboundPolicy.from_env()
        self._cache: BoundedCache[Any] = BoundedCache(**cache_args)

    def for_config(self, config: RagConfiguration) -> Reranker | None:
        if config.reranker == "none":
            return None
        return self._cache.get_or_build(cache_key(config.reranker, config.rerankerParameters, config.tenant),
                                        lambda: self._build(config))

    def _build(self, config: RagConfiguration) -> Reranker | None:
        params = resolve_parameters(config.rerankerParameters, self.resolver, config.tenant)
        self.outbound.check_endpoints(config.rerankerParameters, params, f"rerankerParameters of {config.reranker!r}")
        return build(config.reranker, params)
