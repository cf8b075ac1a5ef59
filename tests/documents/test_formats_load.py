"""A folder of PDF, DOCX, PPTX and HTML files loads with `kgflow load documents` (embedded default,
real model and stores); lazy-rag --json answers with chunks that say the page, slide or heading
they come from; the encrypted, scanned and corrupt files are named with their reason, the rest
loads, and the command exits 1."""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from processors.commands.cli import main
from tests.documents.format_files import DOCX_FACT, HTML_FACT, PPTX_FACT, write_corpus

QUESTIONS = [  # (question, file, page, heading, words of the fact)
    ("Which element did Marie Curie name after her homeland?", "curie-notes.pdf", 2, "", "named it polonium"),
    ("Who built the piezoelectric quartz electrometer?", "handbook.docx", 2, "Instruments", DOCX_FACT[:40]),
    ("What glows faintly blue in the dark?", "lecture.pptx", 2, "Radium", PPTX_FACT[:30]),
    ("Who shared the 1935 Nobel Prize in Chemistry?", "nobel.html", None, "Irene", HTML_FACT[:30]),
]


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], int, str]:
    root = tmp_path_factory.mktemp("formats")
    write_corpus(root / "corpus")
    home = ["--home", str(root / "home")]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["load", "documents", str(root / "corpus"), "-C", "formats", "--no-progress", *home])
    return home, code, err.getvalue()


def test_bad_files_are_named_with_their_reason_and_the_rest_loads(loaded: tuple[list[str], int, str]) -> None:
    _, code, err = loaded
    assert code == 1, err
    assert "locked.pdf: an encrypted PDF: it needs a password" in err
    assert "scan.pdf: no text layer in its 1 page" in err
    assert "broken.docx: a corrupt ZIP container" in err
    assert "loaded 4 documents" in err and "3 skipped" in err


@pytest.mark.parametrize(("question", "file", "page", "heading", "fact"), QUESTIONS)
def test_answers_cite_the_page_or_heading(
    loaded: tuple[list[str], int, str],
    capsys: pytest.CaptureFixture[str],
    question: str,
    file: str,
    page: int | None,
    heading: str,
    fact: str,
) -> None:
    home, _, _ = loaded
    assert main(["query", "lazy-rag", question, "-C", "formats", "--json", "--no-llm", *home]) == 0
    out = json.loads(capsys.readouterr().out)
    top = out["chunks"][0]
    assert {"id", "document_id", "title", "text", "score", "page", "section"} <= top.keys()
    assert (top["document_id"], top["page"], top["section"]) == (file, page, heading), top
    assert fact in " ".join(top["text"].split())
    assert out["documents"][0]["id"] == file


def test_documents_keep_their_files_titles(
    loaded: tuple[list[str], int, str], capsys: pytest.CaptureFixture[str]
) -> None:
    home, _, _ = loaded
    assert main(["documents", "list", "-C", "formats", *home]) == 0
    titles = {d["id"]: d["title"] for d in json.loads(capsys.readouterr().out)["documents"]}
    assert titles == {
        "curie-notes.pdf": "The Curie Notes",
        "handbook.docx": "Laboratory Handbook",
        "lecture.pptx": "Radioactivity Lecture",
        "nobel.html": "Nobel Prizes of the Curie Family",
    }


def test_the_text_answer_names_the_page(loaded: tuple[list[str], int, str], capsys: pytest.CaptureFixture[str]) -> None:
    home, _, _ = loaded
    assert main(["query", "lazy-rag", QUESTIONS[0][0], "-C", "formats", "--no-llm", *home]) == 0
    out = capsys.readouterr().out
    assert "The Curie Notes (curie-notes.pdf, p. 2" in out, out
