"""Conversation memory and notes become searchable (REQ-EMB-005): with the embed callback each saved
turn or note lands in the agent's memory KB, which a task names like any KB, scoped to its user."""

import pytest

from eddi_rag.answers.extractive import ExtractiveChatModel
from eddi_rag.resource_types import resource_uri
from eddi_rag.workflow.memory import ConversationMemory
from eddi_rag.workflow.memory_kb import MEMORY_KB, EmbeddingSettings
from tests.test_workflow import make_kb, step

TASK = {"id": "chat", "parameters": {"systemMessage": "You are a travel assistant."},
        "knowledgeBases": [{"name": MEMORY_KB, "minScore": 0.5}, {"name": "Trains"}]}


def agent(runtime) -> str:
    trains = make_kb(runtime, "Trains", {"rail.md": "The night train to Vienna leaves at 22:10 from platform 4."})
    llm = runtime.resources.create("llm", {"tasks": [TASK]}).uri
    workflow = runtime.resources.create("workflows", {"workflowSteps": [step(resource_uri("rags", trains, 1)),
                                                                        step(llm, "eddi://ai.labs.llm")]}).uri
    return runtime.resources.create("agents", {"workflows": [workflow]}).id


def converse(runtime, agent_id: str, user: str, messages: list[str], task=TASK) -> ConversationMemory:
    memory = ConversationMemory(agent_id, user_id=user, conversation_id=f"c-{user}", on_save=runtime.memory_knowledge)
    for text in messages:
        memory.user_input = text
        runtime.llm_task.execute(memory, task, ExtractiveChatModel(max_sentences=1))
    return memory


def test_without_a_callback_nothing_is_embedded(runtime):
    id = agent(runtime)
    memory = converse(runtime, id, "ann", ["My dog is called Bruno."])
    assert memory.history[0] == ("user", "My dog is called Bruno.") and len(memory.history) == 2
    assert all(d.name != MEMORY_KB for d in runtime.resources.descriptors("rags"))


def test_a_later_turn_retrieves_an_earlier_fact_and_another_user_never_does(runtime):
    id = agent(runtime)
    remembered = runtime.remember_conversations(EmbeddingSettings(provider="local"))
    converse(runtime, id, "ann", ["Hello! I travel with my dog, a beagle called Bruno.",
                                  "When does the night train to Vienna leave?", "Thanks, that is all."])
    remembered.flush()
    assert remembered.errors == []
    later = ConversationMemory(id, user_input="What is the name of my dog?", user_id="ann", on_save=remembered)
    turn = runtime.llm_task.execute(later, TASK, ExtractiveChatModel(max_sentences=1))
    assert "Bruno" in turn.system_message and "Bruno" in turn.answer
    trace = {t["kb"]: t for t in later.get("rag:trace:chat")}
    assert trace[MEMORY_KB]["chunks"][0]["source"] == "conversation c-ann"
    stranger = ConversationMemory(id, user_input="What is the name of my dog?", user_id="bob")
    assert "Bruno" not in runtime.llm_task.execute(stranger, TASK, None).system_message
    nobody = ConversationMemory(id, user_input="What is the name of my dog?")
    assert "Bruno" not in runtime.llm_task.execute(nobody, TASK, None).system_message


def test_notes_are_searchable_for_their_user(runtime):
    id = agent(runtime)
    remembered = runtime.remember_conversations(EmbeddingSettings(provider="local"), per="user")
    runtime.notes.save(id, "Ann prefers a window seat facing forward.", user_id="ann")
    remembered.flush()
    assert [n["text"] for n in runtime.notes.list(id, "ann")] == ["Ann prefers a window seat facing forward."]
    ask = lambda user: runtime.llm_task.execute(ConversationMemory(id, user_input="Which seat do I prefer?", user_id=user),  # noqa: E731
                                                TASK, None).system_message
    assert "window seat" in ask("ann") and "window seat" not in ask("bob")
    assert remembered.kb_id(id, "ann") != remembered.kb_id(id, "bob")


def test_workflow_rag_alone_does_not_search_memory(runtime):
    id = agent(runtime)
    remembered = runtime.remember_conversations(EmbeddingSettings(provider="local"))
    converse(runtime, id, "ann", ["My dog is called Bruno."])
    remembered.flush()
    auto = {"id": "chat", "enableWorkflowRag": True, "ragDefaults": {"minScore": 0}}
    memory = ConversationMemory(id, user_input="What is my dog called?", user_id="ann")
    runtime.llm_task.execute(memory, auto, None)
    assert [t["kb"] for t in memory.get("rag:trace:chat")] == ["Trains"]


def test_with_embedding_disabled_turns_go_on_and_health_says_why(runtime):
    id = agent(runtime)
    remembered = runtime.remember_conversations(EmbeddingSettings())  # neither providerId nor provider
    memory = converse(runtime, id, "ann", ["My dog is called Bruno."])
    remembered.flush()
    assert len(memory.history) == 2 and "embedding disabled" in remembered.errors[0]
    health = runtime.health.of(remembered.kb_id(id, "ann"))
    assert health["embedding"] == {"status": "disabled", "reason": "neither embeddingProviderId nor embeddingProvider is set "
                                                                   "(EDDI would embed with openai; set embeddingProvider)"}


@pytest.mark.integration
def test_a_memory_kb_by_provider_reference(runtime, openai_server):
    runtime.resources.create("providers", {"type": "openai", "apiKey": "sk-map", "baseUrl": openai_server.base_url}, id="oa")
    id = agent(runtime)
    remembered = runtime.remember_conversations(EmbeddingSettings(providerId="oa", parameters={"dimensions": 16}))
    converse(runtime, id, "ann", ["My dog is called Bruno."])
    remembered.flush()
    assert remembered.errors == [] and openai_server.calls("/embeddings")[0]["headers"]["authorization"] == "Bearer sk-map"
