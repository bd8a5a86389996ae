"""Which values of a resource are secrets, sealed into the vault at save (verbs.sealing; issue 67, point 5): on every
resource type, by a credential's name and a URL's password, never a template over the turn nor what names a model."""

from __future__ import annotations

import pytest

from eddi_rag.verbs.sealing import literals, restored, shown


@pytest.mark.parametrize("kind, data, sealed", [
    ("providers", {"type": "openai", "apiKey": "sk-prov-0123456789", "baseUrl": "https://api.openai.com/v1"},
     {"$.apiKey": "sk-prov-0123456789"}),
    ("llm", {"tasks": [{"id": "a", "type": "openai", "parameters": {"apiKey": "sk-llm-0123456789", "modelName": "gpt-4o",
                                                                    "maxTokens": "800", "systemMessage": "Du bist höflich."}}]},
     {"$.tasks[0].parameters.apiKey": "sk-llm-0123456789"}),
    ("httpcalls", {"targetServerUrl": "https://kb:pässwort-42@api.example.com/v1", "httpCalls": [{"name": "s", "request": {
        "headers": {"X-Api-Key": "k-0123456789", "Authorization": "Bearer {properties.token}", "Accept": "application/json"},
        "auth": {"username": "kb", "password": "geheim-7"}, "queryParams": {"q": "{userInput}"}}}]},
     {"$.targetServerUrl": "pässwort-42", "$.httpCalls[0].request.headers.X-Api-Key": "k-0123456789",
      "$.httpCalls[0].request.auth.password": "geheim-7"}),
    ("rags", {"name": "Atlas", "storeType": "mongodb-atlas", "storeParameters": {
        "connectionString": "mongodb+srv://kb:秘密-9@cluster0.example.net/?retryWrites=true", "collectionName": "docs"}},
     {"$.storeParameters.connectionString": "秘密-9"}),
    ("agents", {"workflows": ["eddi://ai.labs.workflow/workflowstore/workflows/w?version=1"]}, {}),
    ("httpcalls", {"targetServerUrl": "https://api.example.com:8443/v1", "httpCalls": [{"name": "s", "request": {
        "headers": {"Authorization": "${vault:api-token}"}}}]}, {}),
])
def test_the_secrets_of_each_resource_type_are_found_and_nothing_else(kind, data, sealed):
    assert {f.path: f.value for f in literals(data, kind)} == sealed


def test_a_literal_stored_before_is_shown_redacted_and_saved_back_unchanged():
    stored = {"targetServerUrl": "https://kb:pw-0123@api.example.com", "httpCalls": [{"name": "s", "request": {
        "headers": {"X-Api-Key": "k-0123456789"}}}]}
    seen = shown(stored, "httpcalls")
    assert seen == {"targetServerUrl": "https://kb:${vault:REDACTED}@api.example.com", "httpCalls": [{"name": "s", "request": {
        "headers": {"X-Api-Key": "${vault:REDACTED}"}}}]}
    assert restored(seen, stored, "httpcalls") == stored
