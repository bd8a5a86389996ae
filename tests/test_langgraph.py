"""The LlmTask hook as a LangChain Runnable and as a ready LangGraph node; the offline example runs."""

import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langgraph.graph import END, START, StateGraph

from eddi_rag.answers.extractive import ExtractiveChatModel
from eddi_rag.interop.langgraph import RagState, rag_node, rag_runnable
from eddi_rag.resource_types import resource_uri
from tests.test_workflow import make_kb, step

ROOT = Path(__file__).resolve().parents[1]
TASK = {"id": "answer", "parameters": {"systemMessage": "You are a rail assistant."}, "enableWorkflowRag": True}


def agent(runtime) -> str:
    trains = make_kb(runtime, "Trains", {"rail.md": "The night train to Vienna leaves at 22:10 from platform 4.",
                                         "pets.md": "Dogs travel free on night trains when they are kept on a leash."})
    llm = runtime.resources.create("llm", {"tasks": [TASK]}).uri
    workflow = runtime.resources.create("workflows", {"workflowSteps": [step(resource_uri("rags", trains, 1)),
                                                                        step(llm, "eddi://ai.labs.llm")]}).uri
    return runtime.resources.create("agents", {"workflows": [workflow]}).id


def test_the_runnable_gives_the_augmented_messages_and_the_traces(runtime):
    chain = rag_runnable(runtime.turns, agent(runtime))
    out = chain.invoke({"messages": [("user", "hi"), ("assistant", "hello"), ("user", "When does the night train leave?")]})
    system, *rest = out["messages"]
    assert isinstance(system, SystemMessage) and "## Relevant Context:" in system.content and "22:10" in system.content
    assert [type(m) for m in rest] == [HumanMessage, AIMessage, HumanMessage] and rest[-1].content.endswith("leave?")
    assert out["traces"]["rag:trace:answer"][0]["kb"] == "Trains" and out["sources"][0]["source"] == "rail.md"
    # it composes: the augmented messages into a chat model
    answer = (chain | (lambda o: o["messages"]) | ExtractiveChatModel(max_sentences=1)).invoke(
        {"messages": [("user", "When does the night train leave?")]})
    assert "22:10" in answer.content and "[Source 1]" in answer.content


def test_the_runnable_scopes_to_the_user(runtime):
    id = agent(runtime)
    kb = runtime.resources.descriptors("rags")[0].resource.split("/")[-1].split("?")[0]
    runtime.ingest(kb, "ann.md", "Ann's reserved seat on the night train is 42A.", user_id="ann")
    chain = rag_runnable(runtime.turns, id)
    ask = [("user", "Which seat is reserved on the night train?")]
    assert "42A" in chain.invoke({"messages": ask, "user_id": "ann"})["system_message"]
    assert "42A" not in chain.invoke({"messages": ask, "user_id": "bob"})["system_message"]


def test_a_langgraph_agent_answers_and_follow_ups_keep_the_topic(runtime):
    graph = StateGraph(RagState)
    graph.add_node("assistant", rag_node(runtime.turns, agent(runtime), ExtractiveChatModel(max_sentences=1)))
    graph.add_edge(START, "assistant")
    graph.add_edge("assistant", END)
    app = graph.compile()
    state = app.invoke({"messages": [("user", "When does the night train to Vienna leave?")], "user_id": None, "rag": {}})
    assert "22:10" in state["messages"][-1].content and len(state["messages"]) == 2
    state = app.invoke({**state, "messages": [*state["messages"], ("user", "May dogs come along?")]})
    assert "leash" in state["messages"][-1].content
    assert state["rag"]["rag:trace:answer"][0]["queryStrategy"] == "contextualised"
    assert [c["known"] for c in state["rag"]["rag:citations:answer"]] == [True]


@pytest.mark.integration
def test_the_offline_example_runs():
    result = subprocess.run([sys.executable, str(ROOT / "examples" / "langgraph_agent.py"), "--llm", "extractive"],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\nA: ") == 2 and "32 kg" in result.stdout and '"strategy": "contextualised"' in result.stdout
