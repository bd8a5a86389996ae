"""A connector another package brings (issue 58): registered by entry point (group ``eddi_rag.connectors``) and written
in this test module alone, it appears in the configuration's JSON Schema, the docs' field table and the Manager's
source card, its secret field is sealed into the vault on save, and its source runs; no other file names it."""

from __future__ import annotations

import pytest
from pydantic import Field
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from eddi_rag.config import IngestionSource, load_schema
from eddi_rag.sources import connectors
from eddi_rag.sources.base import Connector, Item, Listing, Settings, SourceContext, SyncEnd, feed, holding, secret

pytestmark = pytest.mark.integration


class GreetingSettings(Settings):
    """Greetings, one document each."""

    greetings: list[str] = Field(min_length=1, description="What the documents say.")
    token: str | None = secret("A secret reference to the greeting service's token.")


class GreetingConnector(Connector[GreetingSettings]):
    type = "greeting"
    configuration = GreetingSettings
    needs = "a few greetings"

    def where(self, source: IngestionSource) -> str:
        return f"{len(self.spec(source).greetings)} greetings"

    def validate(self, ctx: SourceContext, source: IngestionSource) -> None:
        pass

    def check_access(self, ctx: SourceContext, source: IngestionSource) -> None:
        pass

    def sync(self, ctx: SourceContext, source: IngestionSource, cursor: str | None, sink) -> SyncEnd:
        spec = self.spec(source)
        assert ctx.resolve(spec.token) == "the-token"  # its secret, read from the vault
        return feed(Listing([Item(f"{source.effective_id}/{i}", f"greeting-{i}.md", holding(f"# Greeting\n\n{g}\n".encode(), "text/markdown"))
                             for i, g in enumerate(spec.greetings)]), sink)

    def one(self, ctx: SourceContext, source: IngestionSource, document_id: str, name: str) -> Item:
        raise NotImplementedError


@pytest.fixture
def registered(tmp_path, monkeypatch):
    """This module's connector installed as a package would install it: a distribution's entry point."""
    dist = tmp_path / "greeting_connector-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: greeting-connector\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[eddi_rag.connectors]\ngreeting = {__name__}:GreetingConnector\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    connectors.reload()
    yield
    monkeypatch.undo()
    connectors.reload()


def test_a_connector_registered_by_entry_point_is_in_the_schema_the_docs_and_runs(registered, tmp_path, monkeypatch):
    from eddi_rag.runtime import Runtime
    from eddi_rag.tools import reference
    from tests.support.kbs import make_kb, sources_held

    item = connectors.configuration_schema()["properties"]["sources"]["items"]
    assert "greeting" in item["properties"]["type"]["enum"] and item["properties"]["type"]["x-needs"]["greeting"] == "a few greetings"
    block = item["properties"]["greeting"]
    assert block["required"] == ["greetings"] and block["properties"]["token"]["writeOnly"] is True
    assert "| `greeting.greetings` |" in reference.configuration() and "| `greeting` | a few greetings |" in reference.configuration()
    assert "greeting" not in load_schema()["properties"]["sources"]["items"]["properties"]  # (the file: built-ins)

    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "the plug-in test's vault key")
    with Runtime(tmp_path / "data") as runtime:
        kb = make_kb(runtime, "Hello", minScore=0, sources=[{"name": "Hi", "type": "greeting",
                                                            "greeting": {"greetings": ["Guten Tag", "你好"], "token": "the-token"}}])
        stored = runtime.resources.read("rags", kb)["sources"][0]["greeting"]
        assert stored["token"].startswith("${vault:") and "the-token" not in str(stored)  # sealed as a built-in's secret
        run = runtime.sources.run(kb, "hi")
        assert (run.status, run.added) == ("COMPLETED", 2), run.error
        assert len(sources_held(runtime, kb)) == 2
        assert runtime.sources.status(kb, "hi")["where"] == "2 greetings"
        with pytest.raises(Exception, match=r"\$\.sources\[0\]\.greeting\.greetings"):
            make_kb(runtime, "Bad", sources=[{"name": "Hi", "type": "greeting", "greeting": {}}])


@pytest.mark.browser
def test_the_managers_source_card_offers_a_registered_connector(registered, browser, server):
    from tests.support.browser import visible
    from tests.support.kbs import make_kb

    url, runtime = server
    kb = make_kb(runtime, "Hello")
    browser.get(f"{url}/ui/kbs/{kb}")
    visible(browser, '[data-path="$.chunkStrategy"]')
    add = browser.find_element(By.XPATH, "//button[text()='+ add a source']")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", add)
    add.click()
    Select(visible(browser, ".source-card .src-type")).select_by_visible_text("greeting")
    card = visible(browser, '.source-card[data-type="greeting"]')
    assert "a few greetings" in card.text
    assert card.find_element(By.CSS_SELECTOR, '[data-block="greetings"]').is_displayed()
    browser.get("about:blank")
