import pytest
from jsonschema import Draft202012Validator

from eddi_rag.config import (
    ConfigValidationError,
    LlmTaskRag,
    RagConfiguration,
    load_schema,
    validate_rag_configuration,
)


def test_schema_is_valid_draft_2020_12_and_requires_name():
    from eddi_rag.embeddings.references import ENTRY_SCHEMA

    Draft202012Validator.check_schema(load_schema(ENTRY_SCHEMA))  # (every packaged schema: load_schema does not check)
    schema = load_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"].endswith("2020-12/schema")
    assert schema["required"] == ["name"]


def test_schema_defaults_are_the_model_defaults():
    model = RagConfiguration(name="x").model_dump()
    for field, spec in load_schema()["properties"].items():
        if "default" in spec:
            assert model[field] == spec["default"], field


def test_eddi_defaults():
    """EDDI's defaults, but for the embedding provider (with neither embeddingProviderId nor
    embeddingProvider, embedding is disabled (REQ-EMB-011, issue 13) where EDDI assumes openai) and the
    chunking and search measured best (tests/test_defaults.py; EDDI's on its stored vectors)."""
    c = validate_rag_configuration({"name": "kb"})
    assert (c.embeddingProvider, c.storeType, c.chunkStrategy) == (None, "in-memory", "markdown")
    assert c.embedding_disabled == "neither embeddingProviderId nor embeddingProvider is set (EDDI would embed with openai; set embeddingProvider)"
    assert (c.chunkSize, c.chunkOverlap, c.maxResults, c.minScore) == (512, 64, 5, 0.6)


def test_unknown_keys_are_ignored_like_eddi():
    c = validate_rag_configuration({"name": "kb", "somethingNew": 1})
    assert "somethingNew" not in c.to_json()


@pytest.mark.parametrize(
    "data, path, value",
    [
        ({}, "$.name", None),  # a required field: named where it is missing
        ({"name": ""}, "$.name", ""),
        ({"name": "kb", "minScore": 1.5}, "$.minScore", 1.5),
        ({"name": "kb", "minScore": -0.1}, "$.minScore", -0.1),
        ({"name": "kb", "maxResults": 0}, "$.maxResults", 0),
        ({"name": "kb", "chunkStrategy": "by-vibes"}, "$.chunkStrategy", "by-vibes"),
        ({"name": "kb", "chunkSize": "big"}, "$.chunkSize", "big"),
        ({"name": "kb", "chunkSize": 100, "chunkOverlap": 100}, "$.chunkOverlap", 100),
        ({"name": "kb", "embeddingParameters": {"model": ["a"]}}, "$.embeddingParameters.model", ["a"]),
    ],
)
def test_errors_name_the_json_path_and_the_bad_value(data, path, value):
    with pytest.raises(ConfigValidationError) as e:
        validate_rag_configuration(data)
    assert {"path": path, "value": value} in [{"path": x["path"], "value": x["value"]} for x in e.value.errors]
    assert path in str(e.value)


def test_all_errors_are_reported_at_once():
    with pytest.raises(ConfigValidationError) as e:
        validate_rag_configuration({"name": "kb", "minScore": 2, "maxResults": 0})
    assert {x["path"] for x in e.value.errors} == {"$.minScore", "$.maxResults"}


def test_llm_task_rag_fields_and_defaults():
    task = LlmTaskRag.model_validate({"id": "t", "knowledgeBases": [{"name": "a", "maxResults": None}]})
    assert task.knowledgeBases[0].maxResults is None
    assert task.enableWorkflowRag is False and task.maxRagContextChars == 20000 and task.httpCallRag is None
