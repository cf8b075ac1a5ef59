"""`kgflow load documents` over what careless users hand it: duplicate ids, `report.md` in two
folders, a non-UTF-8 JSONL line, a title over the limit, an empty file, `/dev/zero`. Every document
the load cannot take is named and skipped, the others load, and the exit status says some were
dropped; `--scope year=2024` then finds the document loaded with `{"year": 2024}`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from processors.commands.cli import main
from processors.ingest.documents import files
from processors.ingest.documents.files import Unreadable, read_documents
from schemas.documents import Document, LoadDocuments

MAX_TITLE_CHARS = 2048  # as documented


def jsonl(path: Path, *rows: dict[str, object] | bytes) -> Path:
    path.write_bytes(b"".join(r if isinstance(r, bytes) else json.dumps(r).encode() + b"\n" for r in rows))
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> list[Path]:
    """Two folders with a `report.md` each, a JSONL with a repeated id, a non-UTF-8 line, a long
    title and an empty file; the documents that must load are named `keep-*` or `a/...`."""
    for folder, text in (("a", "# Quarterly report\nSales of Acme rose in Lima."), ("b", "# Other\nA second one.")):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "report.md").write_text(text, encoding="utf-8")
    (tmp_path / "a" / "long-title.md").write_text("# " + "Acme " * 1000 + "\nAcme opened in Quito.", encoding="utf-8")
    (tmp_path / "a" / "empty.md").write_text("\n\n", encoding="utf-8")
    rows = jsonl(
        tmp_path / "rows.jsonl",
        {"id": "keep-1", "text": "Acme was founded in Lima in 2024.", "metadata": {"year": 2024}},
        {"id": "keep-2", "text": "Acme moved to Quito in 2023.", "metadata": {"year": "2023"}},
        {"id": "keep-1", "text": "A second document with the first one's id."},
        b'{"id": "latin", "text": "Caf\xe9 in Lima"}\n',
        {"id": "keep-3", "text": "Acme sells anvils.", "metadata": {"year": "2024"}},
    )
    return [tmp_path / "a", tmp_path / "b", rows]


def test_every_document_not_read_is_named(corpus: list[Path]) -> None:
    read = list(read_documents(corpus))
    docs = {d.id: d for d in read if isinstance(d, Document)}
    skipped = {u.where: u.error for u in read if isinstance(u, Unreadable)}
    assert sorted(docs) == ["keep-1", "keep-2", "keep-3", "long-title.md", "report.md"]
    assert docs["report.md"].title == "Quarterly report"  # the first folder's
    assert len(docs["long-title.md"].title) == MAX_TITLE_CHARS  # a heading is cut to the title limit
    assert docs["keep-1"].text.startswith("Acme was founded")
    rows = corpus[2]
    assert skipped == {
        str(corpus[0] / "empty.md"): "no text in it (an empty file)",
        str(corpus[1] / "report.md"): f"duplicate document id 'report.md' (first read from {corpus[0] / 'report.md'})",
        f"{rows}:3": f"duplicate document id 'keep-1' (first read from {rows}:1)",
        f"{rows}:4": "not UTF-8 text (byte 0xe9 at offset 28)",
    }
    assert not any("\ufffd" in d.text for d in docs.values())


def test_files_are_bounded_before_they_are_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (dev_zero,) = read_documents([Path("/dev/zero")])
    assert dev_zero == Unreadable("/dev/zero", "not a regular file or directory")
    big = tmp_path / "big.txt"
    size = (1 << 20) + 1  # over the operator's bound, set to 1 MB
    with big.open("wb") as f:  # sparse: never read
        f.truncate(size)
    monkeypatch.setenv("KGFLOW_MAX_FILE_MB", "1")
    (too_big,) = read_documents([big])
    why = f"{size:,} bytes, over the limit of 1 MB a file (KGFLOW_MAX_FILE_MB sets it)"
    assert too_big == Unreadable(str(big), why)
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 200)
    monkeypatch.setattr(files, "SKIP_BLOCK", 64)
    rows = jsonl(tmp_path / "r.jsonl", {"id": "long", "text": "y" * 1000}, {"id": "short", "text": "Acme."})
    long, short = read_documents([rows])
    assert isinstance(long, Unreadable) and long.where == f"{rows}:1" and "line over 200 bytes" in long.error
    assert isinstance(short, Document) and short.id == "short"


def test_one_load_refuses_two_documents_with_one_id() -> None:
    docs = [Document(id="x", text="one"), Document(id="y", text="two"), Document(id="x", text="three")]
    with pytest.raises(ValidationError, match="duplicate document ids in one load: 'x'"):
        LoadDocuments(user="u", collection="c", documents=docs)


def test_the_cli_names_what_it_skipped_and_exits_non_zero(
    corpus: list[Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = str(tmp_path / "home")
    code = main(["load", "documents", *map(str, corpus), "--home", home, "-C", "c", "--no-progress"])
    err = capsys.readouterr().err
    assert code == 1, err
    assert "loaded 5 documents" in err and "4 skipped" in err and "Traceback" not in err, err
    named = ("empty.md: no text in it", f"{corpus[1] / 'report.md'}: duplicate", "rows.jsonl:3: duplicate")
    for name in (*named, "rows.jsonl:4"):
        assert f"kgflow: skipped {corpus[0].parent}" in err and name in err, name

    def found(*scope: str) -> set[str]:
        args = ["query", "lazy-rag", "Where is Acme?", "--home", home, "-C", "c", "--no-llm", "--json"]
        assert main([*args, *(x for s in scope for x in ("--scope", s))]) == 0
        return {d["id"] for d in json.loads(capsys.readouterr().out)["documents"]}

    assert found("year=2024") == {"keep-1", "keep-3"}  # the number and the text
    assert found('year="2024"') == {"keep-3"}  # only the text
    assert found("year=2023") == {"keep-2"}
