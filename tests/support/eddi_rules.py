"""EDDI's import rules for a RagConfiguration, transcribed from its source (labsai/EDDI, read 2026-11-27) so a test
can hold our exports to them; each rule names where it is read:

- ``configs/rag/model/RagConfiguration.java`` ``validate()``: ``findUnsupportedSettings()`` refuses a non-blank
  ``embeddingProvider`` outside ``SUPPORTED_EMBEDDING_PROVIDERS`` and a non-blank ``chunkStrategy`` outside
  ``SUPPORTED_CHUNK_STRATEGIES`` (``recursive``, case-insensitive) once ``normalizeLegacyChunkStrategy()`` has
  rewritten ``paragraph``/``sentence``; every source passes ``IngestionSource.validate()`` and no two share an
  effective id (id, else name);
- ``configs/rag/model/IngestionSource.java`` ``validate()``: a name; a type of ``web`` (with a ``web`` block whose
  ``startUrl`` is http(s)) or ``upload``;
- ``embeddingParameters`` and ``storeParameters`` are ``Map<String, String>``: Jackson reads a scalar into a string,
  an object or a list not at all;
- the store types its ``EmbeddingStoreFactory`` builds (the class' javadoc lists them)."""

from __future__ import annotations

from typing import Any

SUPPORTED_EMBEDDING_PROVIDERS = {"openai", "azure-openai", "ollama", "mistral", "bedrock", "cohere", "gemini", "vertex"}
SUPPORTED_CHUNK_STRATEGIES = {"recursive"}
LEGACY_CHUNK_STRATEGIES = {"paragraph", "sentence"}
STORE_TYPES = {"in-memory", "pgvector", "mongodb-atlas", "elasticsearch", "qdrant", "chroma"}


def refusals(config: dict[str, Any]) -> list[str]:
    """Why EDDI's import would refuse ``config`` (empty: it imports)."""
    out = []
    provider = config.get("embeddingProvider", "openai")
    if isinstance(provider, str) and provider.strip() and provider.strip() not in SUPPORTED_EMBEDDING_PROVIDERS:
        out.append(f"Unsupported embeddingProvider {provider!r}")
    strategy = config.get("chunkStrategy", "recursive")
    if isinstance(strategy, str) and strategy.strip():
        normal = "recursive" if strategy.strip().lower() in LEGACY_CHUNK_STRATEGIES else strategy
        if normal.strip().lower() not in SUPPORTED_CHUNK_STRATEGIES:
            out.append(f"Unsupported chunkStrategy {strategy!r}")
    if config.get("storeType", "in-memory") not in STORE_TYPES:
        out.append(f"no store of type {config.get('storeType')!r}")
    for field in ("embeddingParameters", "storeParameters"):
        for key, value in (config.get(field) or {}).items():
            if isinstance(value, (dict, list)):
                out.append(f"{field}.{key} is not a string")
    seen = set()
    for source in config.get("sources") or []:
        name = source.get("name")
        if not name or not str(name).strip():
            out.append("Ingestion source needs a name")
            continue
        kind = source.get("type", "web")
        if kind == "web":
            url = (source.get("web") or {}).get("startUrl") or ""
            if not url.startswith(("http://", "https://")):
                out.append(f"source {name!r}: startUrl must be http or https")
        elif kind != "upload":
            out.append(f"Unsupported ingestion source type {kind!r} on source {name!r}")
        key = source.get("id") or name
        if key in seen:
            out.append(f"Two ingestion sources share the id or name {key!r}")
        seen.add(key)
    return out
