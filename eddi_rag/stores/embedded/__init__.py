"""The stores that run inside the process, needing no server: ``memory`` and ``sqlite`` (numpy rows
with exact or HNSW search: ``rows``, ``masks``, ``ann``; BM25: ``bm25``) and ``sqlite_vec``."""
