"""Reranking: over-fetched candidates reordered by a model that reads query and passage together.
HTTP rerankers are tested on the wire against a local server speaking each API's real format; the
cross-encoder with a small ONNX model and tokenizer the test builds."""

from __future__ import annotations

import json

import numpy as np
import pytest

from eddi_rag.resource_types import resource_uri
from eddi_rag.retrieval.rerankers import build
from eddi_rag.workflow.memory import ConversationMemory
from tests.support.wire import WireStandIn
from tests.test_workflow import RAG, TASK, make_agent, make_kb, step

DOCS = {f"d{i}.md": text for i, text in enumerate([
    "Night trains to Vienna leave at 22:10 from platform 4.",
    "The night train to Vienna has sleeper cabins with two berths.",
    "Trains to Vienna run every hour during the day.",
    "Goulash is served in the dining car until 21:00.",
    "Bicycles travel on night trains in a special compartment.",
])}


def prefers(word: str):
    """A rerank server that scores a document 1.0 when it holds ``word``, else by its length."""
    def score(doc: str) -> float:
        return 1.0 if word in doc.lower() else 0.5 - len(doc) / 1000

    def cohere_or_jina(request):
        body = request["json"]
        ranked = sorted(range(len(body["documents"])), key=lambda i: -score(body["documents"][i]))[: body["top_n"]]
        return 200, {"id": "r1", "results": [{"index": i, "relevance_score": score(body["documents"][i])} for i in ranked],
                     "meta": {"billed_units": {"search_units": 1}}}

    def voyage(request):
        body = request["json"]
        ranked = sorted(range(len(body["documents"])), key=lambda i: -score(body["documents"][i]))[: body["top_k"]]
        return 200, {"object": "list", "data": [{"index": i, "relevance_score": score(body["documents"][i])} for i in ranked],
                     "model": body["model"], "usage": {"total_tokens": 42}}

    return cohere_or_jina, voyage


@pytest.mark.integration
@pytest.mark.parametrize("kind,model,top", [("cohere", "rerank-v3.5", "top_n"),
                                            ("jina", "jina-reranker-v2-base-multilingual", "top_n"),
                                            ("voyage", "rerank-2", "top_k")])
def test_http_rerankers_speak_their_api_and_reorder(runtime, monkeypatch, kind, model, top):
    cohere_or_jina, voyage = prefers("bicycles")
    with WireStandIn(voyage if kind == "voyage" else cohere_or_jina) as server:
        monkeypatch.setenv("EDDI_VAULT_RERANK_KEY", "rk-123")
        kb = make_kb(runtime, "Trains", DOCS, minScore=0, maxResults=2, reranker=kind,
                     rerankerParameters={"apiKey": "${vault:rerank-key}", "baseUrl": server.url})
        hits = runtime.query(kb, "night train to Vienna")
        (call,) = server.calls("/rerank")
        assert call["headers"]["authorization"] == "Bearer rk-123"
        assert call["json"]["model"] == model and call["json"]["query"] == "night train to Vienna"
        assert len(call["json"]["documents"]) == 5 and call["json"][top] == 5  # 2 results x 4, capped by the KB's 5 chunks
        assert hits[0].metadata["source"] == "d4.md" and hits[0].rerank_score == 1.0 and len(hits) == 2
        assert hits.rerank["before"][0] != hits.rerank["after"][0] == hits[0].id
        assert 0 <= hits[0].score <= 1  # the cosine relevance stays (minScore's meaning)


@pytest.mark.integration
def test_http_reranker_retries_429_and_names_missing_keys(runtime):
    cohere_or_jina, _ = prefers("goulash")
    with WireStandIn(cohere_or_jina) as server:
        server.fail_next = [429, 503]
        kb = make_kb(runtime, "Trains", DOCS, minScore=0, maxResults=1, reranker="cohere",
                     rerankerParameters={"apiKey": "k", "baseUrl": server.url})
        assert runtime.query(kb, "dinner")[0].metadata["source"] == "d3.md"
        assert len(server.calls("/rerank")) == 3
    with pytest.raises(ValueError, match="rerankerParameters.apiKey is required"):
        build("jina", {})
    with pytest.raises(ValueError, match="rerankerParameters.modelPath"):
        build("cross-encoder", {"tokenizerPath": "x"})
    with pytest.raises(ValueError, match="rerankerParameters.colour is not a parameter"):
        build("cohere", {"apiKey": "k", "colour": "red"})


@pytest.mark.integration
def test_the_trace_records_the_order_before_and_after(runtime):
    cohere_or_jina, _ = prefers("bicycles")
    with WireStandIn(cohere_or_jina) as server:
        kb = make_kb(runtime, "Trains", DOCS, minScore=0, maxResults=2, reranker="cohere",
                     rerankerParameters={"apiKey": "k", "baseUrl": server.url})
        agent = make_agent(runtime, [step(resource_uri("rags", kb, 1), RAG)])
        memory = ConversationMemory(agent, user_input="night train to Vienna")
        runtime.llm_task.execute(memory, {**TASK, "knowledgeBases": [{"name": "Trains"}]}, None)
    (entry,) = memory.get("rag:trace:answer")
    assert entry["rerank"]["reranker"] == "cohere" and len(entry["rerank"]["before"]) == 5
    assert entry["rerank"]["after"] == [c["id"] for c in entry["chunks"]]
    assert "[Source 1: d4.md, whole document]" in memory.get("rag:context:answer")


# --- a local ONNX cross-encoder built by the test -------------------------------------------

def build_cross_encoder(folder, favourite: str):
    """A WordLevel tokenizer over the documents' words and a one-layer ONNX model: logit = sum over
    the pair's tokens of a per-token weight; ``favourite`` weighs 5, every other token 0.01."""
    import onnx
    from onnx import TensorProto, helper
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = sorted({w for text in DOCS.values() for w in text.lower().replace(".", " ").split()} | {"dinner"})
    vocab = {"[PAD]": 0, "[UNK]": 1, **{w: i + 2 for i, w in enumerate(words)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    tokenizer.normalizer = __import__("tokenizers").normalizers.Lowercase()
    tokenizer.save(str(folder / "tokenizer.json"))
    weights = np.full((len(vocab), 1), 0.01, dtype=np.float32)
    weights[0] = 0.0
    weights[vocab[favourite]] = 5.0
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["emb"], axis=0),  # [B, T, 1]
         helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
         helper.make_node("Unsqueeze", ["mask_f", "axes"], ["mask3"]),  # [B, T, 1]
         helper.make_node("Mul", ["emb", "mask3"], ["masked"]),
         helper.make_node("ReduceSum", ["masked", "sum_axes"], ["logits"], keepdims=0)],  # [B, 1]
        "toy-cross-encoder",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
         helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, ["batch", "tokens"])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])],
        [helper.make_tensor("table", TensorProto.FLOAT, weights.shape, weights.flatten().tolist()),
         helper.make_tensor("axes", TensorProto.INT64, [1], [2]),
         helper.make_tensor("sum_axes", TensorProto.INT64, [1], [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(folder / "model.onnx"))
    return str(folder / "model.onnx"), str(folder / "tokenizer.json")


def test_cross_encoder_reranks_with_a_local_onnx_model(runtime, tmp_path):
    model, tokenizer = build_cross_encoder(tmp_path, favourite="goulash")
    reranker = build("cross-encoder", {"modelPath": model, "tokenizerPath": tokenizer, "batchSize": 2})
    scores = reranker.scores("dinner", list(DOCS.values()))
    assert int(np.argmax(scores)) == 3 and len(scores) == 5
    kb = make_kb(runtime, "Trains", DOCS, minScore=0, maxResults=2, reranker="cross-encoder",
                 rerankerParameters={"modelPath": model, "tokenizerPath": tokenizer})
    hits = runtime.query(kb, "night train to Vienna")
    assert hits[0].metadata["source"] == "d3.md" and hits[0].rerank_score > 5
    assert json.dumps(hits[0].to_json())  # rerankScore is plain JSON
