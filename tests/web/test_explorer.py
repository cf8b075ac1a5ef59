"""The explorer page end to end: headless Chromium against a real `kgflow up` (embedded, SQLite, on a free
port, in a temporary home, no token: loopback) whose home holds the demo graph (examples/sample.tsv,
collection `demo`) and the demo documents (examples/documents, `docs`). Its text-completion is a scripted
OpenAI-compatible endpoint (scripted_llm.py) that streams its answer in pieces, so the page's streaming
is really exercised; lazy-rag questions are asked with the page's "no model" box ticked.

Screenshots go to each test's tmp_path; with KGFLOW_UPDATE_SCREENSHOT=1 the first test's also replaces
docs/explorer.png (the README's picture).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page

from processors.algorithms.iris import RELATION_NS, field_iri
from tests.gateway.gw_support import BIN, ROOT, kgflow_up, up_env
from tests.web.browser import ask, click_node, node_labels, wait_connected, watch_answer
from tests.web.scripted_llm import ANSWER, SUMMARY, ScriptedLlm, pieces

pytestmark = pytest.mark.timeout(600)


def _load(home: Path, env: dict[str, str], kind: str, path: Path, collection: str) -> None:
    cmd = [str(BIN / "kgflow"), "load", kind, str(path), "--home", str(home), "-C", collection, "--no-progress"]
    subprocess.run(cmd, check=True, env=env, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory, llm: ScriptedLlm) -> Iterator[str]:
    """`kgflow up` (no token, loopback) with the demo graph and documents loaded; yields the page's URL."""
    home = tmp_path_factory.mktemp("explorer") / "home"
    env = up_env()
    _load(home, env, "triples", ROOT / "examples" / "sample.tsv", "demo")
    _load(home, env, "documents", ROOT / "examples" / "documents", "docs")
    with kgflow_up(home, up_env(**llm.env())) as url:
        yield url + "/"


def test_asks_sees_the_answer_stream_the_seed_drawn_and_opens_a_cited_chunk(
    page: Page, explorer: str, llm: ScriptedLlm, tmp_path: Path
) -> None:
    """The issue's "done when": ask, watch the answer stream in, see the subgraph with the seed entity
    highlighted, open a chunk the answer cites."""
    probes: list[str | None] = []
    page.on("request", lambda r: r.url.endswith("/api/v1/flow") and probes.append(r.headers.get("authorization")))
    wait_connected(page, explorer)
    # Loopback without a token configured: nothing asked, nothing sent.
    assert page.inner_text("#status") == "connected as default"
    assert not page.locator("#token-dialog[open]").count() and probes == [None]

    watch_answer(page)
    answer = ask(page, "demo", "graph-rag", "Where was marie_curie's husband born?")
    assert answer == ANSWER
    assert llm.requests and llm.requests[-1]["stream"] is True
    seen = page.evaluate("window.answerSeen")
    partial = [(text, nodes) for text, nodes in seen if text and text != ANSWER]
    # The page showed the answer growing, piece by piece, each a prefix of the next ...
    assert len({text for text, _ in partial}) >= len(pieces()) - 1, seen
    assert all(ANSWER.startswith(text) for text, _ in partial), seen
    # ... with the subgraph already drawn (the explain frame comes before the first piece).
    assert all(nodes > 0 for _, nodes in partial), seen
    assert "marie curie" in node_labels(page, ".seed.top")  # the seed the question names, ringed
    assert "pierre curie" in node_labels(page, "*") and "paris" in node_labels(page, "*")
    assert "store round trips" in page.inner_text("#stats")
    assert "scripted-model" in page.inner_text("#stats")
    shot = tmp_path / "explorer.png"
    page.screenshot(path=str(shot))
    if os.environ.get("KGFLOW_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(shot, ROOT / "docs" / "explorer.png")

    # Over the documents: the seed is drawn, and the chunk the answer cites by id opens.
    answer = ask(page, "docs", "lazy-rag", "Which element did Marie Curie name after her homeland?", no_model=True)
    assert "Marie Curie" in node_labels(page, ".seed")
    cited = page.locator("#answer button.cite")
    assert cited.count() >= 1, answer
    opened: dict[str, str] = {}  # each cited chunk id -> the text its dialog showed
    for n in range(cited.count()):
        chunk_id = cited.nth(n).get_attribute("data-chunk") or ""
        cited.nth(n).click()
        page.wait_for_selector("#chunk-dialog[open]")
        assert chunk_id in page.inner_text("#chunk-meta")  # the dialog shows the chunk that was cited
        opened[chunk_id] = page.inner_text("#chunk-text")
        if "named it polonium" in opened[chunk_id]:
            page.screenshot(path=str(tmp_path / "cited-chunk.png"))
        page.click("#chunk-close")
    assert len(set(opened.values())) == len(opened), "distinct citations opened the same text"
    assert any("named it polonium" in text for text in opened.values()), opened
    # A retrieved chunk from the Sources list opens too, with its document named.
    page.click("#chunks li button >> text=Polonium and radium")
    page.wait_for_selector("#chunk-dialog[open]")
    assert "polonium-and-radium.md" in page.inner_text("#chunk-meta")


def test_a_tapped_node_expands_one_hop(page: Page, explorer: str, tmp_path: Path) -> None:
    wait_connected(page, explorer)
    ask(page, "demo", "graph-rag", "Where was marie_curie's husband born?", no_model=True)
    # Copenhagen is an isolated seed (not drawn); a click on Niels Bohr brings it in one hop.
    assert "copenhagen" not in node_labels(page, "*")
    click_node(page, "niels bohr")
    page.wait_for_function("() => document.querySelector('#entity').innerText.includes('one hop:')")
    page.wait_for_function("() => explorer.cy.nodes().some(n => n.data('label') === 'copenhagen')")
    assert "copenhagen" in node_labels(page, ".hop")
    page.screenshot(path=str(tmp_path / "expanded.png"))


def test_collections_documents_and_communities(page: Page, explorer: str, tmp_path: Path) -> None:
    wait_connected(page, explorer)
    page.select_option("#collection", "docs")
    page.click("#tab-library-button")
    rows = page.inner_text("#collections")
    assert "demo" in rows and "docs" in rows
    page.wait_for_selector("#documents-list >> text=polonium-and-radium.md")
    page.wait_for_selector("#communities tr >> nth=0")
    levels = page.locator("#community-level option").all_inner_texts()
    assert "level 0" in levels, levels
    page.click("#communities tr >> nth=0")
    page.wait_for_selector("#community >> text=Top entities")
    page.click("#community button >> text=Draw in graph")
    page.wait_for_function("() => explorer.cy.nodes().length > 1")
    page.click("#community button >> text=Summarize")
    page.wait_for_function("() => !document.querySelector('#community .summary').innerText.includes('summarizing')")
    assert page.inner_text("#community .summary").strip()
    page.screenshot(path=str(tmp_path / "communities.png"))


def test_loads_a_triples_file_and_a_document_from_the_page(page: Page, explorer: str, tmp_path: Path) -> None:
    tsv = tmp_path / "poets.tsv"
    tsv.write_text("O'Brien_(poet)\tborn_in\tSão_Paulo\nSão_Paulo\tlocated_in\tBrazil\n", encoding="utf-8")
    doc = tmp_path / "note.md"
    doc.write_text("# A note on Recife\n\nRecife is a city in Brazil, on the Atlantic coast.\n", encoding="utf-8")
    wait_connected(page, explorer)
    page.click("#tab-load-button")
    page.fill("#load-collection", "from-page")
    page.set_input_files("#triples-file", str(tsv))
    page.click("#load-triples")
    page.wait_for_selector("#load-state >> text=done")
    assert "poets.tsv: 8 triples stored in from-page" in page.inner_text("#load-log")
    assert page.evaluate("document.querySelector('#load-progress').value") == 8

    # The page named the entities as `kgflow load triples` does: the gateway finds the edge by that IRI.
    body = {"collection": "from-page", "s": {"t": "i", "i": field_iri("O'Brien_(poet)")}}
    req = urllib.request.Request(
        explorer + "api/v1/flow/default/service/triples", json.dumps(body).encode(), method="POST"
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        found = json.load(r)["response"]
    edge = [t for t in found if t["p"]["i"] == field_iri("born_in", RELATION_NS)]
    assert edge and edge[0]["o"]["i"] == field_iri("São_Paulo"), found

    page.set_input_files("#doc-files", str(doc))
    page.click("#load-documents")
    page.wait_for_selector("#load-state >> text=done", timeout=120_000)
    log = page.inner_text("#load-log")
    assert "note.md: 1 chunks" in log and "communities rebuilt" in log, log
    page.click("#tab-library-button")
    page.wait_for_selector("#documents-list >> text=A note on Recife")
    page.screenshot(path=str(tmp_path / "loaded.png"))


def test_graph_rag_draws_only_its_seeds_as_seeds(page: Page, explorer: str) -> None:
    """graph-rag scores up to `entity-limit` candidates but starts from the entities the question names:
    only those are seeds (before, every candidate a fact reached was drawn as one)."""
    wait_connected(page, explorer)
    ask(page, "demo", "graph-rag", "Where was marie_curie's husband born?", no_model=True)
    assert node_labels(page, ".seed") == ["marie curie"]
    assert {"pierre curie", "paris"} <= set(node_labels(page, "*"))  # the facts around it are still drawn


def test_a_lazy_rag_answer_is_rendered_markdown(page: Page, explorer: str, llm: ScriptedLlm) -> None:
    wait_connected(page, explorer)
    answer = ask(page, "docs", "lazy-rag", "Which element did Marie Curie name after her homeland?")
    assert "**" not in answer and "- element" not in answer, answer  # no raw markdown shown
    assert page.inner_text("#answer strong") == "Polonium" and page.inner_text("#answer em") == "Poland"
    assert page.inner_text("#answer li") == "element: polonium"
    assert page.locator("#answer p button.cite").count() == 1  # the citation inside the rendered text still opens


def test_markdown_in_an_answer_never_runs_as_html(page: Page, explorer: str, llm: ScriptedLlm) -> None:
    """A model (or a passage it quotes) that writes HTML gets it shown as text: nothing runs, nothing loads."""
    attack = ('<img src=x onerror="window.pwned=1"> <script>window.pwned=2</script> '
              '**[x](javascript:window.pwned=3)** <a href="javascript:window.pwned=4">click</a> {cite}')  # fmt: skip
    llm.summary = attack
    try:
        wait_connected(page, explorer)
        answer = ask(page, "docs", "lazy-rag", "Which element did Marie Curie name after her homeland?")
    finally:
        llm.summary = SUMMARY
    assert '<img src=x onerror="window.pwned=1">' in answer and "<script>window.pwned=2</script>" in answer
    for tag in ("img", "script", "a", "iframe"):
        assert page.locator(f"#answer {tag}").count() == 0, tag
    page.click("#answer strong")  # the bold "link" is text
    page.wait_for_timeout(300)
    assert page.evaluate("window.pwned") is None
