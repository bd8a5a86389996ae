"""The library's verbs: what every face (the Python API, REST, MCP, the CLI, the Manager UI, the
LangChain/LangGraph adapters, the EDDI import) calls, and nothing else. A face translates its input
and output; every rule lives here once.

- ``knowledge_bases``: a knowledge base's configuration as it is used (validated, its provider reference
  resolved), the rules a resource passes before it is saved, and every KB of a tenant, listed a page at a time.
- ``catalog``: a tenant's resources read and listed; an agent in and out as an EDDI export.
- ``saving``: create, update, duplicate, delete resources (a knowledge base's chunks and jobs with it).
- ``search``: one ``SearchRequest`` (KB, query or vector, k, minScore, filters, user, expansion, mode)
  → scored chunks and their passages; ``retrieve`` is the cached retrieve contract over it; ``in_turn`` the
  LlmTask hook's search.
- ``ingesting``: text, a file, a batch of documents, a queued file; its jobs (status, retry, cancel, re-parse).
- ``documents``: list, delete, purge expired, drop a store's chunks; a chunk switched on or off.
- ``health``: a knowledge base's health, the doctor's checks, one verdict, a failed search explained.
- ``turns``: one LLM task turn through the LlmTask hook.
- ``sources``: a knowledge base's sources run, previewed, retried, purged, their permissions synced, their status and
  connection; ``schedule`` starts the runs and permission syncs that are due. The connectors are below, in
  ``eddi_rag.sources``.
- ``feedback`` (votes), ``questions`` (test questions), ``keys``, ``variables``, ``collections``.
"""
