"""What a loaded document may be: the rules every way in (CLI, gateway, MCP) shares."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from processors.ingest.documents.pipeline import index_document
from processors.ingest.extractor.relations import FoundRelation
from schemas.documents import MAX_TITLE_CHARS, Chunk, Document
from schemas.extraction import ConceptMention


@pytest.mark.parametrize("doc_id", ["a\x00b", "line\nbreak", "tab\there", "bell\x07", "del\x7f"])
def test_an_id_with_a_control_character_is_refused(doc_id: str) -> None:
    with pytest.raises(ValidationError, match="control characters") as e:
        Document(id=doc_id, text="some text")
    assert e.value.errors()[0]["loc"] == ("id",)


@pytest.mark.parametrize("text", ["", " ", "\n\t  \r\n"])
def test_an_empty_or_blank_text_is_refused(text: str) -> None:
    with pytest.raises(ValidationError, match="empty or blank") as e:
        Document(id="d", text=text)
    assert e.value.errors()[0]["loc"] == ("text",)


def test_an_over_long_title_names_the_title() -> None:
    with pytest.raises(ValidationError) as e:
        Document(id="d", title="T" * (MAX_TITLE_CHARS + 1), text="x")
    assert [err["loc"] for err in e.value.errors()] == [("title",)]


@pytest.mark.parametrize("metadata", [{"k": {"nested": 1}}, {"k": [["a"]]}, {"k": None}, {"k": [{"a": 1}]}])
def test_metadata_is_a_mapping_of_scalars_or_lists_of_scalars(metadata: dict[str, object]) -> None:
    with pytest.raises(ValidationError) as e:
        Document(id="d", text="x", metadata=metadata)  # type: ignore[arg-type]
    assert all(err["loc"][0] == "metadata" for err in e.value.errors())


def test_a_plain_document_is_kept_as_given() -> None:
    doc = Document(id="ünï code/42 é", title="A title", text=" text ", metadata={"year": 2024, "tags": ["a", 1, True]})
    assert (doc.id, doc.text, doc.metadata["tags"]) == ("ünï code/42 é", " text ", ["a", 1, True])


def test_an_over_long_name_in_a_title_or_text_is_no_concept_and_the_document_indexes() -> None:
    long_key = "curie" * 120  # 600 characters: a run of text, not a name (it was refused as `key: ... 512`)
    doc = Document(id="d", title=long_key, text=f"{long_key} coined radioactivity with Pierre Curie.")
    chunk = Chunk(id="d#0", document_id="d", text=doc.text, title=doc.title)
    found = [[ConceptMention(key=long_key, label=long_key), ConceptMention(key="pierre curie", label="Pierre Curie")]]
    relations = [[FoundRelation(long_key, "coined", "radioactivity"), FoundRelation("pierre curie", "knew", "x")]]
    indexed = index_document(doc, [chunk], [[0.0]], found, relations)
    assert [c.key for c in indexed.concepts] == ["pierre curie"]
    assert [(r.s, r.o) for r in indexed.relations] == [("pierre curie", "x")]
