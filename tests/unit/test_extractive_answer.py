"""The no-model answer: whole sentences that answer the question, in reading order, cited."""

from __future__ import annotations

from processors.algorithms.extractive import (
    Passage,
    extract_answer,
    no_model_answer,
    render_answer,
    split_sentences,
)
from schemas.documents import Chunk

BOMBE = (
    "Bletchley Park was the central site for British codebreakers during World War II. During the "
    "war, Alan Turing and Gordon Welchman designed the Bombe, an electromechanical device that found "
    "Enigma settings. Dr. Welchman later moved to the United States. The park is now a museum."
)


def _sentences(text: str) -> list[str]:
    return [text[a:b] for a, b in split_sentences(text)]


def test_sentences_end_at_stops_not_at_abbreviations_initials_or_mid_word() -> None:
    text = (
        "Dr. J. R. Smith met Mr. Jones at St. Paul's. They talked, e.g. about 3.5 m of rain!"
        "\n\n## Next\nA list:\n- one item here\n- two items here"
    )
    assert _sentences(text) == [
        "Dr. J. R. Smith met Mr. Jones at St. Paul's.",
        "They talked, e.g. about 3.5 m of rain!",
        "## Next\nA list:",
        "- one item here",
        "- two items here",
    ]


def test_the_answer_is_the_sentence_that_answers_whole_and_cited() -> None:
    chunks = [
        Chunk(id="c1", document_id="d", text=BOMBE, page=12),
        Chunk(
            id="c2",
            document_id="d2",
            text="The Bombe was built by the British Tabulating Machine Company.",
            section="Manufacture",
        ),  # fmt: skip
    ]
    text = no_model_answer("No model:", "Who designed the Bombe with Alan Turing?", chunks)
    first, *rest = text.split("\n")
    assert first == "No model:"
    assert "Alan Turing and Gordon Welchman designed the Bombe, an electromechanical device that found" in rest[0]
    assert "found Enigma settings. " in rest[0]  # the whole sentence
    assert rest[0].endswith("[c1, p. 12]")
    assert "The park is now a museum" not in text  # nothing about the question
    assert not any(line.rstrip().endswith(("During the", "During the war,")) for line in rest)


def test_sentences_keep_reading_order_and_the_budget() -> None:
    passages = [Passage("Alpha is first. Beta mentions the bombe twice: bombe. Gamma is last.", "a"),
                Passage("The bombe was designed in 1939 by Turing.", "b, Origins")]  # fmt: skip
    found = extract_answer("When was the bombe designed by Turing?", passages, budget=200)
    assert [s.citation for s in found] == sorted(s.citation for s in found)  # passage order kept
    assert found[-1].text == "The bombe was designed in 1939 by Turing."
    assert render_answer(found).splitlines()[-1] == "The bombe was designed in 1939 by Turing. [b, Origins]"
    small = extract_answer("When was the bombe designed by Turing?", passages, budget=45)
    assert [s.text for s in small] == ["The bombe was designed in 1939 by Turing."]


def test_a_sentence_over_the_budget_is_cut_at_a_word_with_an_ellipsis() -> None:
    long = "Turing " + "worked on the bombe and " * 40 + "rested."
    (only,) = extract_answer("What did Turing work on?", [Passage(long, "x")], budget=100)
    assert only.text.endswith(" …") and len(only.text) <= 102 and " " + only.text.split()[-2] in long


def test_no_text_gives_the_prefix_alone_and_vectors_break_lexical_ties() -> None:
    assert no_model_answer("No model.", "anything?", [Chunk(id="c", document_id="d", text="  ")]) == "No model."
    passages = [Passage("The first sentence here. The second sentence here.", "p")]
    picked = extract_answer("what?", passages, max_sentences=1, question_vector=[1.0, 0.0],
                            sentence_vectors=[[0.0, 1.0], [1.0, 0.0]])  # fmt: skip
    assert [s.text for s in picked] == ["The second sentence here."]


def test_a_sentence_sharing_nothing_with_the_question_is_left_out_unless_nothing_does() -> None:
    passages = [Passage("Turing designed the bombe. The weather was mild. Lunch was at noon.", "a")]
    assert [s.text for s in extract_answer("Who designed the bombe?", passages)] == ["Turing designed the bombe."]
    assert len(extract_answer("Why?", passages)) == 3  # no sentence matches: the best passage's, in order
