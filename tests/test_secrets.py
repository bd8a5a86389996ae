import pytest

from eddi_rag.common.secrets import SecretNotFoundError, SecretResolver, resolve_parameters


def test_env_and_vault_references_resolve_late():
    resolver = SecretResolver(vault={"openai-key": "sk-vault"}, environ={"PGPASS": "pw", "PGHOST": "h"}, env_names={"PGPASS", "PGHOST"})
    params = {"apiKey": "${eddivault:openai-key}", "password": "${env:PGPASS}", "dimensions": 384, "url": "${env:PGHOST}/db"}
    assert resolve_parameters(params, resolver) == {"apiKey": "sk-vault", "password": "pw", "dimensions": 384, "url": "h/db"}
    assert params["apiKey"] == "${eddivault:openai-key}"  # the stored config is untouched


def test_default_vault_reads_eddi_vault_environment_variables():
    resolver = SecretResolver(environ={"EDDI_VAULT_OPENAI_KEY": "sk-1"})
    assert resolver.resolve("${eddivault:openai-key}") == "sk-1"


def test_eddis_current_vault_spelling_resolves_too():
    """EDDI v6 writes ${vault:KEY} (and rewrites ${eddivault:…} to it on import)."""
    resolver = SecretResolver(vault={"openai-key": "sk-vault"})
    assert resolver.resolve("${vault:openai-key}") == resolver.resolve("${eddivault:openai-key}") == "sk-vault"


def test_missing_secret_names_the_reference_only():
    with pytest.raises(SecretNotFoundError, match=r"\$\{env:NOPE\}"):
        SecretResolver(environ={}, env_names={"NOPE"}).resolve("${env:NOPE}")


def test_redact_hides_every_secret_handed_out():
    resolver = SecretResolver(environ={"K": "sk-live-123456"}, env_names={"K"})
    resolver.resolve("${env:K}")
    assert resolver.redact("401: Incorrect API key provided: sk-live-123456.") == "401: Incorrect API key provided: ***."


@pytest.mark.integration
def test_secrets_never_reach_traces_or_ingestion_statuses(tmp_path, openai_server, monkeypatch):
    from eddi_rag.runtime import Runtime
    from eddi_rag.workflow.memory import ConversationMemory

    monkeypatch.setenv("EDDI_VAULT_LEAKY_KEY", "sk-leaky-0123456789")
    runtime = Runtime(tmp_path)
    try:
        params = {"apiKey": "${vault:leaky-key}", "baseUrl": openai_server.base_url, "maxRetries": 0}
        kb = runtime.resources.create("rags", {"name": "kb", "embeddingProvider": "openai", "embeddingParameters": params})
        job = runtime.jobs.submit(kb.id, 1, "a.md", "text")
        openai_server.fail_next = [401, 401]  # the error message names the refused key
        runtime.jobs.process(job.id)
        status = runtime.jobs.status(job.id).status
        assert status.startswith("failed: ") and "sk-leaky" not in status and "***" in status
        workflow = runtime.resources.create("workflows", {"workflowSteps": [{"type": "eddi://ai.labs.rag", "config": {"uri": kb.uri}}]})
        agent = runtime.resources.create("agents", {"workflows": [workflow.uri]})
        memory = ConversationMemory(agent.id, user_input="hello")
        runtime.llm_task.execute(memory, {"enableWorkflowRag": True}, None)
        (entry,) = memory.get("rag:trace:default")
        assert "error" in entry and "sk-leaky" not in str(memory.data)
    finally:
        runtime.close()
