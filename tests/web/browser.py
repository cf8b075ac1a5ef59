"""Headless Chromium for the explorer's tests: Debian's /usr/bin/chromium (deploy/chromium.sh installs
it) driven by Playwright's Python package; Playwright's own browser download is never used."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = Path(os.environ.get("KGFLOW_CHROMIUM", "/usr/bin/chromium"))
# Headless as root on a machine without a network beyond loopback: no sandbox (root), no GPU, and
# none of Chromium's background connections (they are refused here, many at a time).
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1500, "height": 900}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """One Chromium per test module (a missing Chromium fails the test: run deploy/chromium.sh)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `bash deploy/chromium.sh` (make test does)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh page (own storage); fails the test if the page threw an uncaught error."""
    context = browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(60_000)
    try:
        yield pg
    finally:
        context.close()
    assert not errors, f"the page threw: {errors}"


def wait_connected(pg: Page, url: str) -> None:
    """Open the explorer and wait until it has connected to the gateway."""
    pg.goto(url)
    pg.wait_for_selector("#status.ok")


def ask(pg: Page, collection: str, service: str, question: str, *, no_model: bool = False) -> str:
    """Ask a question from the page and return the answer once it is complete."""
    pg.select_option("#collection", collection)
    pg.select_option("#service", service)
    pg.set_checked("#no-llm", no_model)
    pg.fill("#question", question)
    pg.click("#ask-button")
    pg.wait_for_selector("#answer.done, #answer.error")
    answer = pg.inner_text("#answer")
    assert pg.get_attribute("#answer", "class") == "done", answer
    return answer


def watch_answer(pg: Page) -> None:
    """Record, from now on, each text the answer panel shows and how many graph nodes were drawn then
    (`window.answerSeen`: `[text, nodes]` pairs): how a test sees that the answer streamed in."""
    pg.evaluate(
        """() => {
            window.answerSeen = [];
            const el = document.querySelector('#answer');
            new MutationObserver(() => window.answerSeen.push([el.textContent, explorer.cy.nodes().length]))
                .observe(el, {childList: true, characterData: true, subtree: true});
        }"""
    )


def node_labels(pg: Page, selector: str) -> list[str]:
    """Labels of the drawn nodes matching a Cytoscape selector (e.g. `.seed`)."""
    return pg.evaluate("s => explorer.cy.nodes(s).map(n => n.data('label'))", selector)


def click_node(pg: Page, label: str) -> None:
    """Click a drawn node with the mouse, where Cytoscape drew it."""
    pos = pg.evaluate(
        """label => {
            const n = explorer.cy.nodes().filter(n => n.data('label') === label)[0];
            if (!n) return null;
            const box = explorer.cy.container().getBoundingClientRect();
            const p = n.renderedPosition();
            return {x: box.left + p.x, y: box.top + p.y};
        }""",
        label,
    )
    assert pos is not None, f"no node {label!r} is drawn"
    pg.mouse.click(pos["x"], pos["y"])
