import pytest

from eddi_rag.secrets import SecretNotFoundError, SecretResolver, resolve_parameters


def test_env_and_vault_references_resolve_late():
    resolver = SecretResolver(vault={"openai-key": "sk-vault"}, environ={"PGPASS": "pw"})
    params = {"apiKey": "${eddivault:openai-key}", "password": "${env:PGPASS}", "dimensions": 384, "url": "http://h/${env:PGPASS}"}
    assert resolve_parameters(params, resolver) == {"apiKey": "sk-vault", "password": "pw", "dimensions": 384, "url": "http://h/pw"}
    assert params["apiKey"] == "${eddivault:openai-key}"  # the stored config is untouched


def test_default_vault_reads_eddi_vault_environment_variables():
    resolver = SecretResolver(environ={"EDDI_VAULT_OPENAI_KEY": "sk-1"})
    assert resolver.resolve("${eddivault:openai-key}") == "sk-1"


def test_missing_secret_names_the_reference_only():
    with pytest.raises(SecretNotFoundError, match=r"\$\{env:NOPE\}"):
        SecretResolver(environ={}).resolve("${env:NOPE}")
