"""An administrator sets up a connector source in the Manager alone (issue 58): the source card is made from the
connector's declared fields (those it needs shown, the rest under "More"), a secret goes to the vault from the card,
an error lands on the field of the card that caused it (and no other card turns red), then the run is followed to its
end and permissions are synced. Against the fake of Microsoft Graph (tests/support/fake_graph.py), in a real browser."""

from __future__ import annotations

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select

from tests.support.browser import has_text, no_page_errors, screenshot, visible, wait
from tests.support.fake_graph import CLIENT_ID, CLIENT_SECRET, TENANT, FakeGraph
from tests.support.kbs import make_kb

pytestmark = [pytest.mark.browser, pytest.mark.integration]


def click(browser, element) -> None:
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def field(card, name: str):
    return card.find_element(By.CSS_SELECTOR, f'[data-block="{name}"]')


def test_an_administrator_sets_up_a_sharepoint_source_runs_it_and_syncs_permissions(browser, tmp_path, monkeypatch):
    from eddi_rag.api.app import create_app
    from eddi_rag.runtime import Runtime
    from tests.support.browser import serving

    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "the browser test's vault key")
    monkeypatch.setenv("EDDI_RAG_FOLDER_ROOTS", str(tmp_path))
    (tmp_path / "handbook").mkdir()
    with FakeGraph() as graph, Runtime(tmp_path / "data") as runtime, serving(create_app(runtime)) as url:
        site = graph.site("/sites/hr", "HR")
        drive = graph.drive(site, "Documents")
        graph.put(drive, "leave.md", b"# Leave\n\nStaff take 30 days of annual leave.\n",
                  permissions=[{"grantedToV2": {"group": {"id": "g-hr", "displayName": "HR"}}}])
        graph.put(drive, "canteen.md", b"# Canteen\n\nThe canteen opens at noon.\n",
                  permissions=[{"roles": ["read"], "link": {"scope": "organization", "type": "view"}}])
        graph.groups["g-hr"] = ["u-alice"]
        kb = make_kb(runtime, "Intranet", minScore=0, audience="DOCUMENT_ACL",
                     sources=[{"name": "Handbook", "type": "folder", "folder": {"path": str(tmp_path / "handbook")}}])

        browser.get(f"{url}/ui/kbs/{kb}")
        visible(browser, '[data-path="$.chunkStrategy"]')
        click(browser, browser.find_element(By.XPATH, "//button[text()='+ add a source']"))
        card = browser.find_elements(By.CSS_SELECTOR, ".source-card")[-1]
        card.find_element(By.CSS_SELECTOR, ".src-name").send_keys("Intranet")
        Select(card.find_element(By.CSS_SELECTOR, ".src-type")).select_by_visible_text("sharepoint")
        card = browser.find_elements(By.CSS_SELECTOR, ".source-card")[-1]  # (drawn again for its type)
        assert "Entra app registration" in card.find_element(By.CSS_SELECTOR, ".src-needs").text
        shown = [e.get_attribute("data-block") for e in card.find_elements(By.CSS_SELECTOR, "[data-block]") if e.is_displayed()]
        assert shown == ["tenantId", "clientId", "clientSecret", "sites"]  # what it needs; the rest under "More"

        field(card, "tenantId").send_keys(TENANT)
        click(browser, browser.find_element(By.ID, "save"))  # clientId, its secret and the sites missing
        wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, ".source-card .field.invalid"))
        cards = browser.find_elements(By.CSS_SELECTOR, ".source-card")
        assert cards[0].find_elements(By.CSS_SELECTOR, ".field.invalid") == []  # the folder card is fine
        invalid = card.find_element(By.CSS_SELECTOR, ".card-error").text + " ".join(
            e.text for e in card.find_elements(By.CSS_SELECTOR, ".field-error"))
        assert "clientId" in invalid or "required" in invalid
        screenshot(browser, "sources-1-error-on-its-card")

        field(card, "clientId").send_keys(CLIENT_ID)
        secret = card.find_element(By.CSS_SELECTOR, '[data-field$=".sharepoint.clientSecret"]')
        click(browser, secret.find_element(By.CSS_SELECTOR, "details.vault-key summary"))
        secret.find_element(By.CSS_SELECTOR, "details.vault-key input[type=password]").send_keys(CLIENT_SECRET)
        secret.find_element(By.XPATH, ".//button[text()='Store and use']").click()
        wait(browser).until(lambda d: "Stored in the vault" in secret.text)
        field(card, "sites").send_keys("contoso.sharepoint.com:/sites/hr")
        click(browser, card.find_element(By.CSS_SELECTOR, "details.advanced summary"))
        for name in ("graphUrl", "loginUrl"):
            field(card, name).send_keys(graph.url)
        click(browser, browser.find_element(By.ID, "save"))
        wait(browser, 20).until(lambda d: runtime.resources.current_version("rags", kb) == 2)
        saved = runtime.resources.read("rags", kb)["sources"][1]
        assert saved["sharepoint"] == {"tenantId": TENANT, "clientId": CLIENT_ID, "clientSecret": "${vault:intranet-clientsecret}",
                                       "sites": ["contoso.sharepoint.com:/sites/hr"], "graphUrl": graph.url, "loginUrl": graph.url}
        has_text(browser, "#save", "version 3")  # the page reloaded after the save
        assert CLIENT_SECRET not in browser.page_source

        browser.get(f"{url}/ui/kbs/{kb}/documents")
        source = visible(browser, '.source[data-source="intranet"]')
        wait(browser).until(lambda d: "SharePoint contoso.sharepoint.com:/sites/hr" in source.text)
        click(browser, source.find_element(By.CSS_SELECTOR, ".src-run"))
        wait(browser, 60).until(lambda d: source.find_elements(By.CSS_SELECTOR, ".run-end"))
        assert "completed" in source.find_element(By.CSS_SELECTOR, ".run-end").text and "added 2" in source.text
        assert "COMPLETED" not in source.text  # (issue 67, point 13: statuses in words, not the API's enums)
        screenshot(browser, "sources-2-run-finished")
        click(browser, source.find_element(By.CSS_SELECTOR, ".src-sync"))
        wait(browser, 60).until(lambda d: "Finished" in source.text and "Permissions" in source.text
                                and "completed" in source.find_element(By.CSS_SELECTOR, ".source-status").text.split("Permissions")[-1])
        assert runtime.groups.of("default", "u-alice") == ["g-hr"]
        # (issue 67, point 12) History says which row is a run and which a permission sync
        click(browser, next(b for b in source.find_elements(By.TAG_NAME, "button") if b.text == "History"))
        wait(browser).until(lambda d: len(source.find_elements(By.CSS_SELECTOR, "table tbody tr")) == 2)
        kinds = [r.find_elements(By.TAG_NAME, "td")[1].text for r in source.find_elements(By.CSS_SELECTOR, "table tbody tr")]
        assert kinds == ["Permission sync", "Run"], kinds
        no_page_errors(browser)
        browser.get("about:blank")


def test_an_administrator_has_a_page_for_keys_the_group_directory_and_the_vault(browser, server):
    """Issue 58, finding 10: keys made (bound to a user, with groups; shown once) and revoked, each group membership with
    its origin (set here, or a source's permission sync), the vault's state and what to do when it is off."""
    url, runtime = server
    _, boss = runtime.keys.create("default", "admin", name="boss")
    runtime.groups.set("default", "carol", ["finance"])
    runtime.groups.directory.synced("default", "source:kb1/intranet", {"alice": ["g-hr"]})
    browser.delete_all_cookies()
    browser.get(f"{url}/ui/admin")
    visible(browser, "#credential").send_keys(boss + "\n")
    has_text(browser, "#keys tbody", "boss")
    rows = {r.find_element(By.CSS_SELECTOR, "td").text: r.text for r in browser.find_elements(By.CSS_SELECTOR, "#groups tbody tr")}
    assert "set here" in rows["carol"] and "permission sync of kb1/intranet" in rows["alice"]
    assert "EDDI_VAULT_MASTER_KEY" in browser.find_element(By.ID, "admin-vault").text  # off here: what the operator does

    form = browser.find_element(By.ID, "new-key")
    form.find_element(By.NAME, "name").send_keys("bob's agent")
    form.find_element(By.NAME, "user").send_keys("bob")
    form.find_element(By.NAME, "groups").send_keys("finance, travel")
    click(browser, form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    secret = visible(browser, "#new-key-out .secret-once").text
    assert secret.startswith("erk_") and runtime.keys.keys.authenticate(secret).user_id == "bob"
    row = has_text(browser, "#keys tbody", "bob's agent").find_element(By.XPATH, ".//tr[contains(., \"bob's agent\")]")
    assert "finance, travel" in row.text and secret not in browser.find_element(By.ID, "keys").text
    screenshot(browser, "admin-1-keys-groups-vault")
    click(browser, row.find_element(By.XPATH, ".//button[text()='Revoke']"))
    browser.switch_to.alert.accept()
    has_text(browser, "#new-key-out", "Revoked bob's agent")
    wait(browser).until(lambda d: "bob's agent" not in d.find_element(By.ID, "keys").text)

    form = browser.find_element(By.ID, "set-groups")
    form.find_element(By.NAME, "user").send_keys("dan")
    form.find_element(By.NAME, "groups").send_keys("legal")
    click(browser, form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    has_text(browser, "#set-groups-out", "dan is now in: legal")
    assert runtime.groups.of("default", "dan") == ["legal"]
    no_page_errors(browser)
    browser.get("about:blank")


def test_the_first_key_is_an_administrators_signs_in_and_the_vault_replaces_rotates_and_deletes(browser, tmp_path, monkeypatch):
    """Issue 67, point 14: the first key made on the Admin page left "auth off" on the page until a sign-in, and nothing
    said it should be an administrator's; the vault section could neither replace a value nor delete a secret."""
    from eddi_rag.api.app import create_app
    from eddi_rag.runtime import Runtime
    from tests.support.browser import axe_violations, serving

    monkeypatch.setenv("EDDI_VAULT_MASTER_KEY", "the browser test's vault key")
    with Runtime(tmp_path / "data") as runtime, serving(create_app(runtime)) as url:
        runtime.vault.vault.store("default", "smtp-password", "first-value-1", "the mail server's")
        browser.delete_all_cookies()
        browser.get(f"{url}/ui/admin")
        note = visible(browser, "#first-key-note")
        assert "first key turns auth on" in note.text and "administrator" in note.text
        form = browser.find_element(By.ID, "new-key")
        assert Select(form.find_element(By.NAME, "role")).first_selected_option.text == "admin"  # the first key: an admin's
        form.find_element(By.NAME, "name").send_keys("me")
        click(browser, form.find_element(By.CSS_SELECTOR, "button[type=submit]"))
        secret = visible(browser, "#new-key-out .secret-once").text
        assert runtime.keys.keys.authenticate(secret).role == "admin"
        assert browser.find_element(By.CSS_SELECTOR, ".who").text == "auth on · not signed in"  # not "auth off" any more
        assert browser.find_elements(By.ID, "first-key-note") == []
        click(browser, visible(browser, "#sign-in-with-key"))
        has_text(browser, ".who", "admin")  # signed in with it, on the same page
        has_text(browser, "#keys tbody", "me")

        row = has_text(browser, "#secrets tbody", "smtp-password").find_element(By.CSS_SELECTOR, "tr")
        click(browser, row.find_element(By.CSS_SELECTOR, "details.replace-secret summary"))
        row.find_element(By.CSS_SELECTOR, "details.replace-secret input[type=password]").send_keys("second-value-2")
        click(browser, row.find_element(By.XPATH, ".//button[text()='Replace']"))
        has_text(browser, "#vault-out", "Replaced the value of ${vault:smtp-password}")
        assert runtime.vault.vault.value("default", "smtp-password") == "second-value-2"
        assert "second-value-2" not in browser.page_source and "first-value-1" not in browser.page_source

        click(browser, browser.find_element(By.ID, "rotate-dek"))
        browser.switch_to.alert.accept()
        has_text(browser, "#vault-out", "1")  # the one secret encrypted again
        assert runtime.vault.vault.value("default", "smtp-password") == "second-value-2"
        assert axe_violations(browser) == []

        row = has_text(browser, "#secrets tbody", "smtp-password").find_element(By.CSS_SELECTOR, "tr")
        click(browser, row.find_element(By.XPATH, ".//button[text()='Delete']"))
        browser.switch_to.alert.accept()
        has_text(browser, "#vault-out", "Deleted smtp-password")
        has_text(browser, "#secrets tbody", "No secrets stored yet")
        assert runtime.vault.vault.list("default") == []
        screenshot(browser, "admin-2-first-key-and-vault")
        no_page_errors(browser)
        browser.get("about:blank")


def test_the_fields_a_card_says_it_needs_are_in_view(browser, server):
    """Issue 67, point 14: the S3 keys and the IMAP password, which the card's "Needs" line asks for, were hidden under
    "More…" (only required fields were in view)."""
    url, runtime = server
    kb = make_kb(runtime, "Mail and bucket", sources=[
        {"name": "Mail", "type": "imap", "imap": {"host": "mail.example.org", "username": "archive"}},
        {"name": "Bucket", "type": "s3", "s3": {"bucket": "handbooks"}}])
    browser.get(f"{url}/ui/kbs/{kb}")
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".source-card")) == 2)
    for card, needed in zip(browser.find_elements(By.CSS_SELECTOR, ".source-card"), (["password"], ["accessKeyId", "secretAccessKey"])):
        for name in needed:
            shown = field(card, name)
            assert shown.is_displayed() and not shown.find_elements(By.XPATH, "ancestor::details[contains(@class, 'advanced')]"), name
    no_page_errors(browser)
    browser.get("about:blank")
