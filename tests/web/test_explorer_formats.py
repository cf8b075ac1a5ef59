"""The explorer's Load tab in real Chromium: a PDF, a DOCX and a PPTX load from their bytes
(the gateway reads them), an encrypted PDF is named with the reason while the others load, and
the Library lists the files under the titles they give themselves; a no-model answer over them
cites the PDF's page, and the cited chunk's dialog names it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from tests.documents.format_files import write_corpus
from tests.gateway.gw_support import kgflow_up, up_env
from tests.web.browser import ask, wait_connected


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    home = tmp_path_factory.mktemp("explorer-formats") / "home"
    with kgflow_up(home, up_env()) as url:
        yield url + "/"


def test_the_load_tab_loads_office_files_and_names_the_refused(page: Page, explorer: str, tmp_path: Path) -> None:
    files = write_corpus(tmp_path / "corpus")
    wait_connected(page, explorer)
    page.click("#tab-load-button")
    page.fill("#load-collection", "page-files")
    page.set_input_files("#doc-files", [str(files[k]) for k in ("pdf", "docx", "pptx", "encrypted")])
    page.click("#load-documents")
    page.wait_for_selector("#load-state >> text=done", timeout=300_000)
    log = page.inner_text("#load-log")
    assert "locked.pdf: not loaded: document locked.pdf: an encrypted PDF: it needs a password" in log, log
    for name in ("curie-notes.pdf", "handbook.docx", "lecture.pptx"):
        assert f"{name}: " in log and f"{name}: not loaded" not in log, log
    assert "loaded 3 of 4 documents" in log and "1 not loaded" in log, log
    page.click("#tab-library-button")
    page.wait_for_selector("#documents-list >> text=The Curie Notes", timeout=60_000)
    listed = page.inner_text("#documents-list")
    assert "Laboratory Handbook" in listed and "Radioactivity Lecture" in listed, listed
    page.screenshot(path=str(tmp_path / "loaded-files.png"))

    # With no model the answer cites the PDF's page, and the cited chunk's dialog names it too.
    wait_connected(page, explorer)
    question = "Which element did Marie Curie name after her homeland?"
    answer = ask(page, "page-files", "lazy-rag", question, no_model=True)
    assert "named it polonium" in answer and ", p. 2]" in answer, answer
    cited = page.locator("#answer button.cite", has_text=", p. 2]").first
    cited.click()
    page.wait_for_selector("#chunk-dialog[open]")
    meta = page.inner_text("#chunk-meta")
    assert "curie-notes.pdf" in meta and "p. 2" in meta and (cited.get_attribute("data-chunk") or "?") in meta, meta
    assert "named it polonium" in page.inner_text("#chunk-text")
