import numpy as np
import pytest

from eddi_rag.backends import registry
from eddi_rag.backends.factories import EmbeddingModelFactory
from eddi_rag.common.secrets import SecretResolver
from eddi_rag.embeddings.cache import CachedEmbeddings, StateVectorCache, open_cache
from eddi_rag.state.sqlite import Database


def test_local_model_gives_normalised_384d_vectors_that_mean_something(local_model):
    v = np.array(local_model.embed_documents([
        "The cat sat on the mat.", "A kitten was resting on the rug.", "Quarterly VAT returns are due in April.",
    ]))
    assert v.shape == (3, 384)
    assert np.allclose(np.linalg.norm(v, axis=1), 1, atol=1e-5)
    assert v[0] @ v[1] > 0.5 > v[0] @ v[2]


def test_local_model_batching_keeps_order_and_matches_single_calls(local_model):
    texts = ["short", "a much longer sentence about trains and timetables " * 5, "medium length text here", "x"]
    batch = np.array(local_model.embed_documents(texts))
    singles = np.array([local_model.embed_query(t) for t in texts])
    assert np.allclose(batch, singles, atol=1e-4)


def test_local_model_runs_long_texts_one_at_a_time_and_short_ones_together(local_model, monkeypatch):
    """A run holds at most batchTokens padded tokens (256) and batchSize texts (8): full-length chunks run one by
    one (faster per chunk on a CPU), short texts eight at a time; the vectors are those of single calls."""
    runs: list[tuple[int, int]] = []
    session = local_model.session

    class Spy:
        def run(self, outputs, feed):
            runs.append(feed["input_ids"].shape)
            return session.run(outputs, feed)

    monkeypatch.setattr(local_model, "session", Spy())
    long = [f"chunk {i} " + "timetables and platforms of the night train " * 40 for i in range(3)]
    short = [f"question {i}" for i in range(10)]
    vectors = np.array(local_model.embed_documents([*long, *short]))
    assert sorted(runs) == sorted([(8, 4), (2, 4), (1, 256), (1, 256), (1, 256)])
    monkeypatch.setattr(local_model, "session", session)
    assert np.allclose(vectors, [local_model.embed_query(t) for t in [*long, *short]], atol=1e-4)


def test_local_model_truncates_long_input(local_model):
    v = local_model.embed_query("word " * 5000)
    assert len(v) == 384


def test_unknown_provider_names_the_known_ones():
    known = "azure-openai, bedrock, cohere, gemini, google, local, local-multilingual, mistral, ollama, openai, vertex"
    with pytest.raises(registry.UnknownProviderError, match=f"known: {known}"):
        registry.load(registry.EMBEDDINGS, "nope")


@pytest.mark.integration
def test_openai_provider_speaks_the_real_wire_format(openai_server):
    factory = EmbeddingModelFactory(None, SecretResolver(environ={"EDDI_VAULT_KEY": "sk-test"}))
    model = factory.get("openai", {"apiKey": "${vault:key}", "model": "text-embedding-3-small",
                                   "dimensions": 32, "baseUrl": openai_server.base_url})
    vectors = model.embed_documents(["alpha", "beta"])
    assert len(vectors) == 2 and len(vectors[0]) == 32
    (request,) = openai_server.calls("/embeddings")
    assert request["path"] == "/v1/embeddings"
    assert request["json"]["model"] == "text-embedding-3-small"
    assert request["json"]["dimensions"] == 32
    assert request["json"]["input"] == ["alpha", "beta"]  # raw strings, no tiktoken download
    assert request["headers"]["authorization"] == "Bearer sk-test"


def test_openai_provider_requires_an_api_key():
    with pytest.raises(ValueError, match="embeddingParameters.apiKey"):
        EmbeddingModelFactory(None).get("openai", {})


@pytest.fixture(params=["sqlite", "redis"])
def cache_spec(request, tmp_path):
    """Where the cache lives: a SQLite file, or a real redis-server started for the test session."""
    if request.param == "redis":
        return lambda: open_cache(request.getfixturevalue("redis_url"), Database())
    return lambda: open_cache("sqlite", Database(tmp_path / "cache.db"))


@pytest.mark.integration
def test_cache_means_unchanged_text_calls_no_provider(openai_server, cache_spec):
    params = {"apiKey": "sk", "baseUrl": openai_server.base_url, "dimensions": 16, "model": f"m-{id(cache_spec)}"}
    model = EmbeddingModelFactory(cache_spec()).get("openai", params)
    first = model.embed_documents(["one", "two"])
    assert len(openai_server.calls("/embeddings")) == 1
    # A new factory on the same cache (a restart) still hits it.
    again = EmbeddingModelFactory(cache_spec()).get("openai", params)
    assert again.embed_documents(["two", "one"]) == [first[1], first[0]]
    assert len(openai_server.calls("/embeddings")) == 1
    again.embed_documents(["one", "three"])
    (last,) = openai_server.calls("/embeddings")[1:]
    assert last["json"]["input"] == ["three"]  # only the new text is sent


def test_cache_key_covers_model_and_dimensions(tmp_path):
    calls = []

    class Counting:
        def embed_documents(self, texts):
            calls.append(list(texts))
            return [[1.0, 0.0] for _ in texts]

    cache = StateVectorCache(Database(tmp_path / "c.db"))
    CachedEmbeddings(Counting(), cache, "p", "m1", 2).embed_documents(["t"])
    CachedEmbeddings(Counting(), cache, "p", "m2", 2).embed_documents(["t"])
    CachedEmbeddings(Counting(), cache, "p", "m1", 3).embed_documents(["t"])
    CachedEmbeddings(Counting(), cache, "p", "m1", 2).embed_documents(["t"])
    assert len(calls) == 3


def test_factory_builds_one_model_per_configuration():
    factory = EmbeddingModelFactory(None)
    a = factory.get("local", {})
    assert factory.get("local", {}) is a
    assert factory.get("local", {"batchSize": 8}) is not a
