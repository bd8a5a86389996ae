"""The documentation a user finds: README stays short and its examples run; the generated references
(docs/configuration.md from the JSON Schema, docs/cli.md from --help) are what the product declares now;
every relative link of README and docs/ points at something that exists."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from eddi_rag.cli import main
from eddi_rag.config import validate_rag_configuration
from eddi_rag.tools import reference

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
PAGES = sorted((ROOT / "docs").glob("*.md"))


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)\n```", text, re.S)


def test_the_readme_is_short_and_its_quick_start_has_exactly_the_two_commands():
    assert len(README.splitlines()) <= 250
    assert blocks(README, "bash")[0].splitlines() == ["./scripts/demo", "./scripts/test"]
    assert "exec scripts/test\n" in (ROOT / ".ci/run").read_text()


@pytest.mark.parametrize("page", sorted(reference.PAGES))
def test_the_generated_references_are_up_to_date(page):
    current = (ROOT / "docs" / page).read_text()
    assert reference.rendered(page, current, main) == current, f"docs/{page} is stale: run .venv/bin/eddi-rag reference"


def test_the_packaged_schema_is_what_the_connectors_make():
    """Its source blocks are the connectors' (issue 67: the S3 access key id marked secret in the connector and not in
    the file, which was written from itself)."""
    assert reference.schema_file() == (ROOT / "schemas/rag-configuration.schema.json").read_text(), "run .venv/bin/eddi-rag reference"


def test_the_configuration_reference_names_every_field_of_the_schema():
    schema = json.loads((ROOT / "schemas/rag-configuration.schema.json").read_text())
    text = (ROOT / "docs/configuration.md").read_text()
    assert [f for f in schema["properties"] if f"| `{f}` |" not in text] == []


@pytest.mark.parametrize("path", [ROOT / "README.md", *PAGES], ids=lambda p: p.name)
def test_every_relative_link_points_at_a_file_that_exists(path):
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text())
    missing = [link for link in links if "://" not in link and not (path.parent / link).exists()]
    assert missing == []


def test_the_readme_knowledge_base_is_a_valid_configuration():
    config = validate_rag_configuration(json.loads(blocks(README, "json")[0]))
    assert config.chunkStrategy == "markdown" and config.sources[0].block("folder") is not None


def test_the_readme_python_example_runs_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "guide.md").write_text("# Accounts\n\n## Passwords\n\nTo reset your password, open Settings and choose Reset.\n")
    example = blocks(README, "python")[0]
    scope: dict = {}
    exec(compile(example, "README.md", "exec"), scope)  # noqa: S102 - the README's own example
    found, context = scope["found"], scope["context"]
    assert found.hits and "reset your password" in found.hits[0].text
    assert context["section"].startswith("## Relevant Context:") and "reset your password" in context["section"]
    scope["rt"].close()


def test_the_public_api_hands_on_what_the_docs_use():
    import eddi_rag

    assert sorted(eddi_rag.__all__) == sorted([*eddi_rag._PUBLIC, "__version__"])
    assert all(getattr(eddi_rag, name).__name__ == name for name in eddi_rag._PUBLIC)


def test_contributing_names_the_tests_of_every_package_and_each_named_test_file_exists():
    """A reader finds the tests of a module from CONTRIBUTING's table; a package or a test file it forgets fails."""
    text = (ROOT / "CONTRIBUTING.md").read_text()
    table = text[text.index("### Where the tests of a module are"):text.index("## Documentation")]
    packages = {p.name for p in (ROOT / "eddi_rag").iterdir() if p.is_dir() and (p / "__init__.py").exists()} - {"schemas"}
    assert sorted(p for p in packages if f"`eddi_rag/{p}/`" not in table) == []
    named = set(re.findall(r"`(test_[a-z0-9_]+\.py)`", table))
    assert sorted(n for n in named if not (ROOT / "tests" / n).exists()) == []
    assert sorted(p.name for p in (ROOT / "tests").glob("test_*.py") if p.name not in named) == []
