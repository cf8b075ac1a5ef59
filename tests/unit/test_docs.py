"""The README reads in five minutes and the docs cite only what the repository holds."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", ROOT / "bench" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)#\s]+)(#[^)\s]*)?\)")  # [text](target#anchor)


def broken_links(doc: Path, text: str) -> list[str]:
    """Relative link targets of `text` (a markdown file at `doc`) that name no file of the repository."""
    return [
        target
        for target, _ in LINK.findall(text)
        if "://" not in target and not target.startswith("mailto:") and not (doc.parent / target).exists()
    ]


def test_the_readme_is_at_most_200_lines() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_every_relative_link_names_a_file_of_the_repository() -> None:
    assert {str(d.relative_to(ROOT)): broken_links(d, d.read_text()) for d in DOCS} == {
        str(d.relative_to(ROOT)): [] for d in DOCS
    }


def test_a_link_to_a_missing_file_is_caught() -> None:
    text = "see [design](DESIGN.md), [cli](docs/cli.md#python-api) and [site](https://example.org/x)"
    assert broken_links(ROOT / "README.md", text) == ["DESIGN.md"]


def test_no_file_cites_the_design_doc_outside_the_repository() -> None:
    citing = [
        str(f.relative_to(ROOT))
        for package in ("schemas", "processors", "bench", "tests", "docs")
        for f in (ROOT / package).rglob("*")
        if f.suffix in (".py", ".md") and f.name != "test_docs.py" and "DESIGN.md" in f.read_text()
    ]
    assert citing == []
