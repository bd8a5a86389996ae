"""Every embedding provider, tested on the wire: our code → the provider's real LangChain
integration and SDK → real HTTP → a local server that speaks that API's request/response format."""

from __future__ import annotations

import json
from urllib.parse import unquote

import pytest

from eddi_rag.backends.factories import EmbeddingModelFactory
from eddi_rag.common.secrets import SecretResolver
from eddi_rag.embeddings.guard import EmbeddingDimensionError
from tests.support.openai_server import OpenAIStandIn
from tests.support.wire import WireStandIn, fake_vector

pytestmark = [pytest.mark.integration]

DIMS = 32
TEXTS = [f"passage {i} about trains" for i in range(5)]


def embed(provider: str, params: dict, texts=TEXTS, environ=None):
    factory = EmbeddingModelFactory(None, SecretResolver(environ=environ or {}))
    return factory.get(provider, params).embed_documents(list(texts))


def ollama(req):
    body = req["json"]
    return 200, {"model": body["model"], "embeddings": [fake_vector(t, DIMS) for t in body["input"]],
                 "total_duration": 1, "load_duration": 1, "prompt_eval_count": len(body["input"])}


def mistral(req):
    body = req["json"]
    return 200, {"id": "emb-1", "object": "list", "model": body["model"],
                 "data": [{"object": "embedding", "index": i, "embedding": fake_vector(t, DIMS)} for i, t in enumerate(body["input"])],
                 "usage": {"prompt_tokens": 1, "total_tokens": 1}}


def cohere(req):
    body = req["json"]
    return 200, {"id": "e-1", "texts": body["texts"], "response_type": "embeddings_by_type",
                 "embeddings": {"float": [fake_vector(t, DIMS) for t in body["texts"]]},
                 "meta": {"api_version": {"version": "1"}, "billed_units": {"input_tokens": 1}}}


def bedrock(req):
    body = req["json"]
    return 200, {"embedding": fake_vector(body["inputText"], body.get("dimensions", DIMS)), "inputTextTokenCount": 3}


def gemini(req):
    reqs = req["json"]["requests"]
    return 200, {"embeddings": [{"values": fake_vector(r["content"]["parts"][0]["text"], DIMS)} for r in reqs]}


def vertex(req):
    if req["path"].endswith("/token"):
        return 200, {"access_token": "ya29.stand-in", "expires_in": 3600, "token_type": "Bearer"}
    body = req["json"]
    return 200, {"predictions": [{"embeddings": {"values": fake_vector(i["content"], DIMS), "statistics": {"truncated": False, "token_count": 3}}}
                                 for i in body["instances"]]}


def check_vectors(vectors, texts=TEXTS):
    assert vectors == [pytest.approx(fake_vector(t, DIMS), abs=1e-6) for t in texts]  # order preserved


def test_openai(tmp_path):
    with OpenAIStandIn() as server:
        check_vectors(embed("openai", {"apiKey": "${vault:k}", "baseUrl": server.base_url, "dimensions": DIMS}, environ={"EDDI_VAULT_K": "sk-1"}))
    (req,) = server.requests
    assert req["path"] == "/v1/embeddings" and req["headers"]["authorization"] == "Bearer sk-1"
    assert req["json"]["model"] == "text-embedding-3-small" and req["json"]["dimensions"] == DIMS and req["json"]["input"] == TEXTS


def test_azure_openai():
    with OpenAIStandIn() as server:
        check_vectors(embed("azure-openai", {"apiKey": "az-key", "endpoint": server.url, "deploymentName": "emb-small", "dimensions": DIMS}))
    (req,) = server.requests
    assert req["path"] == "/openai/deployments/emb-small/embeddings?api-version=2024-10-21"
    assert req["headers"]["api-key"] == "az-key" and req["json"]["dimensions"] == DIMS


def test_ollama():
    with WireStandIn(ollama) as server:
        check_vectors(embed("ollama", {"baseUrl": server.url}))
    (req,) = server.requests
    assert (req["method"], req["path"]) == ("POST", "/api/embed")
    assert req["json"]["model"] == "nomic-embed-text" and req["json"]["input"] == TEXTS


def test_mistral():
    with WireStandIn(mistral) as server:
        check_vectors(embed("mistral", {"apiKey": "m-key", "baseUrl": server.url + "/v1"}))
    (req,) = server.requests
    assert req["path"] == "/v1/embeddings" and req["headers"]["authorization"] == "Bearer m-key"
    assert req["json"]["model"] == "mistral-embed" and req["json"]["input"] == TEXTS


def test_cohere():
    with WireStandIn(cohere) as server:
        check_vectors(embed("cohere", {"apiKey": "c-key", "baseUrl": server.url}))
    (req,) = server.requests
    assert req["path"] == "/v1/embed" and req["headers"]["authorization"] == "Bearer c-key"
    assert req["json"]["model"] == "embed-english-v3.0" and req["json"]["texts"] == TEXTS
    assert req["json"]["input_type"] == "search_document" and req["json"]["embedding_types"] == ["float"]


def test_bedrock_titan_one_signed_request_per_text():
    params = {"accessKeyId": "AKIDEXAMPLE", "secretAccessKey": "secret", "region": "eu-west-1", "dimensions": 256}
    with WireStandIn(bedrock) as server:
        vectors = embed("bedrock", {**params, "endpointUrl": server.url})
    assert [len(v) for v in vectors] == [256] * len(TEXTS)
    assert [unquote(r["path"]) for r in server.requests] == ["/model/amazon.titan-embed-text-v2:0/invoke"] * len(TEXTS)
    req = server.requests[0]
    assert req["headers"]["authorization"].startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert "/eu-west-1/bedrock/aws4_request" in req["headers"]["authorization"]
    assert req["json"] == {"inputText": TEXTS[0], "dimensions": 256}


def test_gemini():
    with WireStandIn(gemini) as server:
        check_vectors(embed("gemini", {"apiKey": "g-key", "baseUrl": server.url, "dimensions": DIMS}))
    (req,) = server.requests
    # google-genai 3.6 calls /v1 where earlier releases called /v1beta; Google's API answers both
    assert req["path"] in ("/v1beta/models/gemini-embedding-2:batchEmbedContents", "/v1/models/gemini-embedding-2:batchEmbedContents")
    assert req["headers"]["x-goog-api-key"] == "g-key"
    first = req["json"]["requests"][0]
    assert first["content"]["parts"][0]["text"] == TEXTS[0] and first["outputDimensionality"] == DIMS


def test_vertex_with_a_service_account(tmp_path):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    with WireStandIn(vertex) as server:
        account = {"type": "service_account", "project_id": "proj", "private_key_id": "k1", "private_key": key,
                   "client_email": "eddi@proj.iam.gserviceaccount.com", "client_id": "1", "token_uri": server.url + "/token"}
        (tmp_path / "sa.json").write_text(json.dumps(account))
        params = {"project": "proj", "location": "europe-west4", "credentialsFile": str(tmp_path / "sa.json"),
                  "baseUrl": server.url, "dimensions": DIMS}
        check_vectors(embed("vertex", params))
    token, predict = server.requests[0], server.requests[-1]
    assert token["path"] == "/token"
    assert predict["path"].endswith("/projects/proj/locations/europe-west4/publishers/google/models/text-embedding-005:predict")
    assert predict["headers"]["authorization"] == "Bearer ya29.stand-in"
    assert predict["json"]["instances"][0]["content"] == TEXTS[0]


# --- the guard: batching, retries, dimension checks --------------------------------------

def test_batches_of_at_most_100_in_order():
    texts = [f"text {i}" for i in range(250)]
    with OpenAIStandIn() as server:
        vectors = embed("openai", {"apiKey": "k", "baseUrl": server.base_url, "dimensions": DIMS}, texts=texts)
    assert [len(r["json"]["input"]) for r in server.requests] == [100, 100, 50]
    check_vectors(vectors, texts)


@pytest.mark.parametrize("status", [429, 500, 503])
def test_429_and_5xx_are_retried(status):
    with OpenAIStandIn() as server:
        server.fail_next = [status, status]
        check_vectors(embed("openai", {"apiKey": "k", "baseUrl": server.base_url, "dimensions": DIMS}))
    assert len(server.requests) == 3


def test_three_attempts_then_the_error():
    with OpenAIStandIn() as server:
        server.fail_next = [503] * 5
        with pytest.raises(Exception, match="503"):
            embed("openai", {"apiKey": "k", "baseUrl": server.base_url})
    assert len(server.requests) == 3


def test_client_errors_are_not_retried():
    with OpenAIStandIn() as server:
        server.fail_next = [400]
        with pytest.raises(Exception, match="400"):
            embed("openai", {"apiKey": "k", "baseUrl": server.base_url})
    assert len(server.requests) == 1


def test_vectors_of_the_wrong_dimension_are_refused():
    with WireStandIn(ollama) as server:  # returns 32-d vectors
        with pytest.raises(EmbeddingDimensionError, match="returned 32-dimensional vectors but embeddingParameters.dimensions is 768"):
            embed("ollama", {"baseUrl": server.url, "dimensions": 768})


def test_an_ingestion_whose_provider_keeps_failing_ends_failed(runtime):
    with OpenAIStandIn() as server:
        server.fail_next = [503] * 3
        kb = runtime.resources.create("rags", {"name": "kb", "embeddingProvider": "openai",
                                               "embeddingParameters": {"apiKey": "k", "baseUrl": server.base_url}}).id
        job = runtime.jobs.submit(kb, 1, "a.md", "Some text.")
        runtime.jobs.process(job.id)
    status = runtime.jobs.status(job.id).status
    assert status.startswith("failed: ") and "503" in status


def gemini_any(req):
    """Gemini's batchEmbedContents, and embedContent (one text)."""
    if "requests" in req["json"]:
        return gemini(req)
    return 200, {"embedding": {"values": fake_vector(req["json"]["content"]["parts"][0]["text"], DIMS)}}


def _task(req) -> str | None:
    body = req["json"]
    first = body["requests"][0] if "requests" in body else body
    return first.get("taskType") or (first.get("config") or {}).get("taskType")


@pytest.mark.parametrize("provider, handler, params, role", [
    ("cohere", cohere, {"apiKey": "c-key"}, lambda r: r["json"]["input_type"]),
    ("gemini", gemini_any, {"apiKey": "g-key", "taskType": "RETRIEVAL_DOCUMENT"}, _task),  # as EDDI's configs write it
])
def test_an_asymmetric_model_embeds_a_query_as_a_query_even_through_the_cache(provider, handler, params, role):
    """Issue 42 (EDDI's 2026-09-21 fix): every query went through the vector cache's embed_documents, so Cohere and
    Gemini embedded it as a document (and a query equal to a chunk's text got that chunk's vector)."""
    from eddi_rag.embeddings.cache import StateVectorCache
    from eddi_rag.state.sqlite import Database

    with WireStandIn(handler) as server:
        factory = EmbeddingModelFactory(StateVectorCache(Database(":memory:")), SecretResolver(environ={}))
        model = factory.get(provider, {**params, "baseUrl": server.url})
        model.embed_documents(["trains to Vienna"])
        model.embed_query("trains to Vienna")
        model.embed_query("trains to Vienna")  # (the second from the cache: the query's own entry)
    assert [role(r) for r in server.requests] == (["search_document", "search_query"] if provider == "cohere"
                                                  else ["RETRIEVAL_DOCUMENT", "RETRIEVAL_QUERY"])


def test_a_gemini_task_type_other_than_retrieval_is_kept_for_both_sides():
    with WireStandIn(gemini_any) as server:
        model = EmbeddingModelFactory(None, SecretResolver(environ={})).get(
            "gemini", {"apiKey": "g-key", "taskType": "CLUSTERING", "baseUrl": server.url})
        model.embed_documents(["a"])
        model.embed_query("b")
    assert [_task(r) for r in server.requests] == ["CLUSTERING", "CLUSTERING"]
