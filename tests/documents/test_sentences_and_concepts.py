"""Sentence boundaries come from spaCy (abbreviations do not end a sentence) and concept labels
read as one line of text (a line break inside a noun phrase is a space)."""

from __future__ import annotations

import pytest

from processors.ingest.documents.chunker import sentences
from processors.ingest.extractor.concepts import doc_concepts, load_pipeline


def test_abbreviations_do_not_end_a_sentence() -> None:
    text = "Dr. Smith met Mr. Jones at the U.S. Army base on Jan. 5. They talked for an hour!\n\nWas it useful? Yes."
    found = [text[s:e] for s, e, _ in sentences(text)]
    assert found == [
        "Dr. Smith met Mr. Jones at the U.S. Army base on Jan. 5.",
        "They talked for an hour!",
        "Was it useful?",
        "Yes.",
    ]
    assert [p for _, _, p in sentences(text)] == [True, False, True, False]


def test_a_paragraph_longer_than_spacy_takes_is_still_split() -> None:
    text = "Word " * 300_000 + "end. Next sentence."  # 1.5M characters in one paragraph
    found = sentences(text)
    assert text[found[-1][0] : found[-1][1]] == "Next sentence."
    assert found[0][0] == 0


@pytest.fixture(scope="module")
def nlp():  # type: ignore[no-untyped-def]
    return load_pipeline()


def test_concept_labels_have_no_line_breaks(nlp) -> None:  # type: ignore[no-untyped-def]
    doc = nlp("Marie Curie discovered a new\nelement in Paris.\nThe Nobel\n  Prize followed.")
    labels = [c.label for c in doc_concepts(doc)]
    assert "new element" in labels and "Nobel Prize" in labels
    assert not any("\n" in label or "  " in label for label in labels)


def test_the_pipelines_layers_multiply_on_numpys_blas(nlp) -> None:  # type: ignore[no-untyped-def]
    """The token encoders (the shared one, the NER's own) run their products on numpy's BLAS, not
    BLIS (which is slower on this CPU): a layer keeps the ops it was loaded with."""
    encoders = [nlp.get_pipe("tok2vec").model, nlp.get_pipe("ner").model.get_ref("tok2vec")]
    layers = [m for enc in encoders for m in enc.walk()]
    assert layers and all(getattr(m.ops, "use_blis", True) is False for m in layers)


def test_stated_names_are_read_from_the_text_after_each_mention(nlp) -> None:  # type: ignore[no-untyped-def]
    doc = nlp("Odense Boldklub (OB) is a club. Giotto di Bondone, known as Giotto, was a painter.")
    aliases = {c.key: c.aliases for c in doc_concepts(doc)}
    assert aliases["odense boldklub"] == ("ob",)
    assert "giotto" in aliases["giotto di bondone"]


RULE_SAMPLES = [
    "I ain't gonna do it, y'all. There is nothing we can do.  Let's go!\n\nGotta run; c'mon, it's late.",
    "It is not what you do, but whether I have it. She had been told that he was nothin' but trouble.",
    "  \n The  dog\t barked at them. That was the one which I saw. Do you have it? Were there any?",
    "Marie Curie, known as Madame Curie, won the Nobel Prize in 1911 because she isolated radium.",
]


def test_indexed_attribute_rules_match_as_the_stock_ruler_does(nlp) -> None:  # type: ignore[no-untyped-def]
    """The pipeline's ruler matches through the index (load_pipeline installs it), and sets every
    token's attributes as spaCy's own matcher does, whitespace, two-token and dependency rules too."""
    from processors.ingest.extractor.attribute_rules import IndexedRules

    ruler = nlp.get_pipe("attribute_ruler")
    assert isinstance(ruler.match, IndexedRules)
    stock = type(ruler).match.__get__(ruler)
    seen: set[str] = set()
    for doc in nlp.pipe(RULE_SAMPLES, disable=["attribute_ruler"]):
        indexed, reference = doc.copy(), doc.copy()
        assert ruler.match(indexed) == stock(reference)
        ruler.set_annotations(indexed, ruler.match(indexed))
        ruler.set_annotations(reference, stock(reference))
        got = [(t.pos_, t.tag_, str(t.morph), t.lemma_, t.dep_) for t in indexed]
        assert got == [(t.pos_, t.tag_, str(t.morph), t.lemma_, t.dep_) for t in reference]
        seen |= {t.pos_ for t in indexed}
    assert seen >= {"PROPN", "VERB", "AUX", "PART", "SCONJ", "SPACE", "PRON"}  # the rules set them
