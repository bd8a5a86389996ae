"""A real browser for the UI tests: Debian's chromium, headless, driven by Selenium through Debian's
chromedriver (``scripts/test`` installs both), against the real server on a loopback port."""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import uvicorn

from tests.support.ports import free_port
from tests.support.waiting import until

CHROMIUM = os.environ.get("EDDI_RAG_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("EDDI_RAG_CHROMEDRIVER", "/usr/bin/chromedriver")
SCREENSHOTS = Path(os.environ.get("EDDI_RAG_UI_SCREENSHOTS", Path(__file__).resolve().parents[2] / "test-artifacts" / "ui"))


def chrome(width: int = 1280, height: int = 900):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not shutil.which(path):
            raise RuntimeError(f"{path} is missing: scripts/test installs Debian's chromium and chromium-driver "
                               "(apt-get install chromium chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", f"--window-size={width},{height}",
                "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--lang=en-US"):
        options.add_argument(arg)
    if width < 500:  # narrower than a desktop window may be: emulate the phone's screen
        options.add_experimental_option("mobileEmulation", {"deviceMetrics": {"width": width, "height": height, "pixelRatio": 1}})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # a page a test left with unsaved edits asks before it is left (the editor's beforeunload): the next test's
    # navigation says yes, as the person would; every other dialog is the test's to answer
    options.set_capability("unhandledPromptBehavior", {"beforeUnload": "accept", "default": "dismiss and notify"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    return driver




@contextmanager
def serving(app) -> Iterator[str]:
    """The app on a real socket (uvicorn in a thread), as ``eddi-rag serve`` runs it."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    until(lambda: server.started or not thread.is_alive(), "the test server to start", 30)
    assert thread.is_alive(), "the test server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def screenshot(driver, name: str) -> Path:
    """The whole page as a PNG under test-artifacts/ui/ (not committed), for a reviewer to look at."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    size = driver.get_window_size()
    height = driver.execute_script("return Math.max(document.body.scrollHeight, document.documentElement.scrollHeight)")
    driver.set_window_size(size["width"], min(max(height + 120, 600), 4000))
    path = SCREENSHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    driver.set_window_size(size["width"], size["height"])
    return path


# -- what the Manager's browser tests share: the page waits, the script-error check ------------------

def wait(driver, seconds: float = 60):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, seconds, poll_frequency=0.1)


def _across_reloads(condition):
    """``condition``, read as not yet met while the page is being replaced: Chromium answers a query of a node of the
    document it is leaving with "Node with given id does not belong to the document" (not a stale element, which
    Selenium's conditions already read as not yet)."""
    from selenium.common.exceptions import WebDriverException

    def met(driver):
        try:
            return condition(driver)
        except WebDriverException as e:
            if "does not belong to the document" in str(e) or "No node with given id" in str(e):
                return False
            raise

    return met


def visible(driver, css: str, seconds: float = 60):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    return wait(driver, seconds).until(_across_reloads(EC.visibility_of_element_located((By.CSS_SELECTOR, css))))


def has_text(driver, css: str, text: str, seconds: float = 60):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC

    wait(driver, seconds).until(_across_reloads(EC.text_to_be_present_in_element((By.CSS_SELECTOR, css), text)))
    return driver.find_element(By.CSS_SELECTOR, css)


def no_page_errors(driver) -> None:
    errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"
              and "status of 4" not in e["message"]]  # a 4xx the page shows is not a script error
    assert errors == [], errors


def no_sideways_scroll(driver) -> bool:
    return driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth")


AXE = Path(__file__).resolve().parents[2] / "scripts" / "axe"


def axe_violations(driver) -> list[str]:
    """What axe-core (``scripts/axe`` installs it from npm: every rule of its default set) finds wrong in the page now, one
    line per rule: its id, how many elements, the first of them."""
    import subprocess

    script = Path(subprocess.run([str(AXE)], capture_output=True, text=True, check=True).stdout.strip()).read_text()
    driver.execute_script(script)
    found = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document).then((r) => done(r.violations.map((v) => `${v.id} (${v.nodes.length}): ${v.nodes[0].html.slice(0, 160)}`)),"
        " (e) => done([`axe failed: ${e}`]));")
    return list(found)
