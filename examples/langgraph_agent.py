"""The travel assistant of examples/workflows as a LangGraph agent, offline.

    .venv/bin/python examples/langgraph_agent.py [--llm extractive] [QUESTION...]

One graph node, eddi-rag's LlmTask hook (rag_node): each turn it finds the agent's knowledge bases,
retrieves, builds the system message with ## Relevant Context:, and asks the chat model: here the
small local model when installed (scripts/local-llm), else the extractive answer. The graph's state
carries the conversation and the hook's memory entries, so the follow-up keeps its subject.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from langgraph.graph import END, START, StateGraph

from eddi_rag.interop.langgraph import RagState, rag_node
from eddi_rag.runtime import Runtime
from eddi_rag.tools.bundle import load_bundle
from eddi_rag.tools.demo import chat_model, describe

EXAMPLES = Path(__file__).resolve().parent
QUESTIONS = ["How many checked bags are included in a Business fare?", "And how heavy may they be?"]


def without_notices(kind: str, id: str, data: dict) -> dict:
    """The task's httpCallRag names the demo's service-notices stand-in, which is not running here."""
    if kind != "llm":
        return data
    return {**data, "tasks": [{k: v for k, v in t.items() if k != "httpCallRag"} for t in data["tasks"]]}


def main(questions: list[str], llm: str | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp, Runtime(tmp) as runtime:
        load_bundle(runtime.saving, EXAMPLES / "workflows", without_notices)
        for kb in sorted((EXAMPLES / "documents").iterdir()):
            for doc in sorted(kb.glob("*.md")):
                runtime.ingest(kb.name, doc.name, doc.read_text(encoding="utf-8"))
        model = chat_model(llm, None, None, offline=True)
        graph = StateGraph(RagState)
        graph.add_node("assistant", rag_node(runtime.turns, "travel-assistant", model))
        graph.add_edge(START, "assistant")
        graph.add_edge("assistant", END)
        app = graph.compile()
        state: dict = {"messages": [], "user_id": "traveller-1", "rag": {}}
        print(f"Answers by {describe(model)}.")
        for question in questions:
            state = app.invoke({**state, "messages": [*state["messages"], ("user", question)]})
            trace = state["rag"].get("rag:trace:travel-answer", [])
            print(f"\nQ: {question}\nA: {state['messages'][-1].content}")
            print("retrieved:", json.dumps([{"kb": t["kb"], "strategy": t.get("queryStrategy"),
                                             "sources": [c["source"] for c in t.get("chunks", [])]} for t in trace]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("questions", nargs="*", default=QUESTIONS)
    parser.add_argument("--llm", choices=["smollm2", "extractive"], default=None, help="default: smollm2 when installed")
    args = parser.parse_args()
    main(args.questions, args.llm)
