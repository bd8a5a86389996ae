"""The library's verbs: what every face (the Python API, REST, MCP, the CLI, the Manager UI, the
LangChain/LangGraph adapters, the EDDI import) calls, and nothing else. A face translates its input
and output; every rule lives here once.

- ``configs``: a knowledge base's configuration (validated, its provider reference resolved) and
  the rules a resource passes before it is saved.
- ``saving``: create, update, duplicate, delete resources (a knowledge base's chunks and jobs with it).
- ``search``: one ``SearchRequest`` (KB, query or vector, k, minScore, filters, user, expansion, mode)
  → scored chunks and their passages; ``retrieve`` is the cached retrieve contract over it.
- ``ingesting``: text, a file, a batch of documents, a queued file.
- ``documents``: list, delete, purge expired, drop a store's chunks.
- ``health``: a knowledge base's health and chunk counts.
- ``turns``: one LLM task turn through the LlmTask hook.
"""
