"""Where other agent frameworks meet the knowledge bases: MCP (``mcp``: a server any MCP client
uses), LangChain (``langchain``: a store as a VectorStore and Retriever) and LangGraph
(``langgraph``: the LlmTask hook as a Runnable and a node). Each is a face over the verbs."""
