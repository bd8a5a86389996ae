"""eddi-rag: knowledge bases (RAG) for LLM agent workflows, EDDI-compatible, offline by default."""

__version__ = "0.1.0"
