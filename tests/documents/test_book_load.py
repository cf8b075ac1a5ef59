"""A book loads: a generated 1,000-page text PDF (more text than one document holds) goes through
`kgflow load documents` as parts cut at pages, with the load's peak memory no larger than a
300-page file's plus a margin (it does not grow with the book: both fill whole embedding and
extraction batches), and an answer cites the page its fact is on. Real reader, model and stores,
the CLI as a user runs it."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from schemas.documents import MAX_DOCUMENT_CHARS, Document
from tests.documents.format_files import text_pdf

pytestmark = pytest.mark.timeout(1500)
KGFLOW = Path(sys.executable).with_name("kgflow")
FACT_PAGE = 777
FACT = "The lighthouse of Varnholm was first lit by the keeper Osric Delamere in the winter of 1852."
GROWTH_MB = 120  # 700 more pages: their text (~0.2 MB) and vectors (~1 MB), with allocator slack


def _pages(n: int) -> list[str]:
    filler = "The ledger lists shipments of grain, salt and iron bound for the northern ports that season."
    filler += f" {filler} The harbour master signed it."
    pages = [f"Ledger page {p}. Clerk {p * 7} counted {p * 3} barrels at the quay. {filler}" for p in range(1, n + 1)]
    if n >= FACT_PAGE:
        pages[FACT_PAGE - 1] += " " + FACT
    return pages


def _kgflow(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, KGFLOW_HOME=str(home))
    return subprocess.run([str(KGFLOW), *args], env=env, capture_output=True, text=True, timeout=1400)


def _load_peak_mb(home: Path, pdf: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Load `pdf`; the peak resident memory of the largest `kgflow` child so far (MB): of the
    largest file loaded so far."""
    done = _kgflow(home, "load", "documents", str(pdf), "-C", "book", "--no-progress")
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, done


def test_a_thousand_page_pdf_loads_in_bounded_memory_and_cites_its_pages(tmp_path: Path) -> None:
    small, book = tmp_path / "register.pdf", tmp_path / "ledger.pdf"
    small.write_bytes(text_pdf("The Short Ledger", _pages(300)))
    book.write_bytes(text_pdf("The Long Ledger", _pages(1000)))
    small_mb, done = _load_peak_mb(tmp_path / "small-home", small)
    assert done.returncode == 0, done.stderr[-2000:]
    book_mb, done = _load_peak_mb(tmp_path / "home", book)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "loaded 2 documents" in done.stderr and "0 failed, 0 skipped" in done.stderr, done.stderr[-2000:]
    assert book_mb < small_mb + GROWTH_MB, (small_mb, book_mb)

    listed = json.loads(_kgflow(tmp_path / "home", "documents", "list", "-C", "book").stdout)["documents"]
    assert {d["id"] for d in listed} == {"ledger.pdf#1", "ledger.pdf#2"}
    assert {d["title"] for d in listed} == {"The Long Ledger"}
    question = "Who first lit the lighthouse of Varnholm?"
    out = _kgflow(tmp_path / "home", "query", "lazy-rag", question, "-C", "book", "--json", "--no-llm")
    res = json.loads(out.stdout)
    top = res["chunks"][0]
    assert top["page"] == FACT_PAGE and top["document_id"].startswith("ledger.pdf#") and "Osric" in top["text"]
    assert "Osric Delamere" in res["answer"] and f"p. {FACT_PAGE}]" in res["answer"]  # the sentence, cited by page
    text = _kgflow(tmp_path / "home", "query", "kg-query", question, "-C", "book", "--no-llm").stdout
    assert f"p. {FACT_PAGE}" in text and "---Entities---" not in text


def test_the_book_is_longer_than_one_document_holds() -> None:
    assert sum(len(p) for p in _pages(1000)) > MAX_DOCUMENT_CHARS  # else the test would not test parts


def test_a_20_mb_text_file_reads_as_parts_in_memory_bounded_by_the_file(tmp_path: Path) -> None:
    import tracemalloc

    from processors.ingest.documents.files import read_documents

    big = tmp_path / "archive.txt"
    line = "The harbour log notes a ship, its cargo of salt and iron, and the tide it sailed on.\n"
    with big.open("w", encoding="utf-8") as f:
        for n in range(20_000_000 // len(line)):
            f.write(f"Entry {n}. {line}" if n % 40 else f"\n{line}")  # paragraphs of 40 lines
    size = big.stat().st_size
    tracemalloc.start()
    docs = list(read_documents([big]))
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert all(isinstance(d, Document) for d in docs) and len(docs) >= size // MAX_DOCUMENT_CHARS
    assert [d.id for d in docs[:2]] == ["archive.txt#1", "archive.txt#2"]
    assert "".join(d.text for d in docs) == big.read_text(encoding="utf-8")  # nothing lost or repeated
    assert all(len(d.text) <= MAX_DOCUMENT_CHARS for d in docs)
    assert peak < 4 * size, (peak, size)  # the bytes, the text and its parts: not more
