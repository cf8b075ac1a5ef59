"""A batch of distractors indexed and linked as the pipeline's `index_document` and `link` index
and link them, without the models in between (bench/documents/corpus.py).

A distractor is an untitled one-chunk document whose mentions are its bank sentences' (numbered by
their place in it), with no typed relations. For such a document the two functions reduce to what
is here: the concepts merged by name (`one_node_per_entity`, called as is), its subject (its first
sentence's), its mentions counted per concept, its sentences' co-occurrences, then the links to
the collection's entities. Built through the pipeline, a distractor cost ~6 ms at load 4-10, most
of it validating about a hundred pydantic models (every co-occurrence, concept and mention, then
the record's): the 1M corpus's build was bound by this, not by the store. The records made here
are equal to the pipeline's (tests/bench/test_bench_documents_scale.py compares them), so the
corpus is the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Protocol

from processors.algorithms.iris import RELATED_TO, concept_iri
from processors.ingest.document_store.linking import Linked, spelling_of
from processors.ingest.documents.pipeline import MAX_PAIRS_PER_SENTENCE, content_hash
from processors.ingest.documents.subjects import Names, one_node_per_entity
from processors.stores.documents_protocol import DocumentRecord, Relation
from schemas.documents import MAX_CONCEPT_CHARS, Chunk, Document, Mention
from schemas.extraction import ConceptMention


class _Sentence(Protocol):
    mentions: list[ConceptMention]


class Distractor(Protocol):
    """What is read of a distractor (bench/documents/corpus.py's)."""

    document: Document
    chunk: Chunk
    sentences: Sequence[_Sentence]
    vector: list[float]


@dataclass
class IndexedDistractor:
    """What `index_document` makes of a distractor, as plain values."""

    distractor: Distractor
    concepts: dict[str, tuple[str, list[str]]]  # key -> (label, aliases), in `index_document`'s order
    mentions: Counter[str]  # key -> mentions in the chunk (`KeyedMention`s)
    pairs: list[tuple[str, str]]  # co-occurring keys (`CoOccurrence`s)
    subject: str  # `subject_key`


def index_distractors(batch: Sequence[Distractor]) -> list[IndexedDistractor]:
    """`[d.indexed() for d in batch]`, as plain values."""
    out = []
    for d in batch:
        found = [(n, m) for n, s in enumerate(d.sentences) for m in s.mentions if len(m.key) <= MAX_CONCEPT_CHARS]
        names = one_node_per_entity([[m for _, m in found]])  # reads keys, kinds and aliases, not sentences
        subject = _subject(found, names)
        concepts, counts = _concepts(found, names, subject)
        out.append(IndexedDistractor(d, concepts, counts, _pairs(found, names, subject),
                                     subject if subject in concepts else ""))  # fmt: skip
    return out


def link_distractors(
    indexed: Sequence[IndexedDistractor], named: Mapping[str, str], claimed: Collection[str]
) -> Linked:
    """`link(indexed documents, named, claimed)`, made directly."""
    out = Linked([])
    new: dict[str, Counter[str]] = {}  # new concepts' spellings in the batch
    for x in indexed:
        out.records.append(_record(x, named, claimed, new, out.relations))
    out.new_concepts = {i: spelling_of(n) for i, n in new.items()}
    return out


def _record(
    x: IndexedDistractor,
    named: Mapping[str, str],
    claimed: Collection[str],
    new: dict[str, Counter[str]],
    relations_seen: set[tuple[str, str, str]],
) -> DocumentRecord:
    """One distractor's record (`link`'s loop body)."""
    iri: dict[str, str] = {}
    owned: set[str] = set()
    known_as: dict[str, list[str]] = {}
    spellings: dict[str, Counter[str]] = {}
    for key, (label, aliases) in x.concepts.items():
        weight = max(x.mentions.get(key, 0), 1)
        if key in named and (named[key] not in claimed or named[key] == concept_iri(key)):
            iri[key] = named[key]
            if iri[key] in claimed:
                owned.add(iri[key])
        else:
            iri[key] = concept_iri(key)
            owned.add(iri[key])
            new.setdefault(iri[key], Counter())[label] += weight
        if iri[key] in owned:  # (a concept loaded as triples keeps its label)
            spellings.setdefault(iri[key], Counter())[label] += weight
        known_as.setdefault(iri[key], []).extend([key, *aliases])
    d, chunk_id = x.distractor, x.distractor.chunk.id
    mentions = [Mention(chunk_id=chunk_id, entity=iri[k], count=n) for k, n in x.mentions.items() if k in iri]
    relations = []
    for a, b in x.pairs:
        if a in iri and b in iri and iri[a] != iri[b]:
            s, o = sorted((iri[a], iri[b]))
            relations.append(Relation(s, RELATED_TO, o, [chunk_id]))
            relations_seen.add((s, RELATED_TO, o))
    keys = {i: k for k, i in reversed(iri.items())}  # an entity's first concept gives its key
    aliases = {i: [a for a in dict.fromkeys(ns) if a != keys[i]] for i, ns in known_as.items()}
    return DocumentRecord(d.document, content_hash(d.document), [d.chunk], [d.vector], mentions, relations, owned,
                          keys=keys, title_entity=iri.get(x.subject), aliases={i: a for i, a in aliases.items() if a},
                          spellings={i: dict(n) for i, n in spellings.items()})  # fmt: skip


def _subject(found: list[tuple[int, ConceptMention]], names: Names) -> str:
    """`subject_key` of an untitled document: the concept its first sentence is about (the first
    entity among that sentence's grammatical subjects, else the first of them), or ""."""
    opening = [m for n, m in found if n == 0 and m.subject]
    best = next((m for m in opening if m.kind.startswith("entity:")), opening[0] if opening else None)
    return names.of(best.key) if best else ""


def _concepts(
    found: list[tuple[int, ConceptMention]], names: Names, subject: str
) -> tuple[dict[str, tuple[str, list[str]]], Counter[str]]:
    """Each concept's (label, aliases), in `index_document`'s order, and its mentions (the subject
    counts once more: a concept of every chunk)."""
    labels: dict[str, Counter[str]] = {}  # each concept's spellings, its other names' too
    own: dict[str, Counter[str]] = {}  # each key's own spellings
    counts = Counter(names.of(m.key) for _, m in found)
    for _, m in found:
        labels.setdefault(names.of(m.key), Counter())[m.label] += 1
        own.setdefault(m.key, Counter())[m.label] += 1
    if subject:
        counts[subject] += 1
    concepts = {
        k: ((own.get(k) or c).most_common(1)[0][0][:MAX_CONCEPT_CHARS],
            [a for a in sorted(names.aliases.get(k, ())) if len(a) <= MAX_CONCEPT_CHARS][:32])
        for k, c in labels.items()
    }  # fmt: skip
    return concepts, counts


def _pairs(found: list[tuple[int, ConceptMention]], names: Names, subject: str) -> list[tuple[str, str]]:
    """The co-occurring concept pairs, in `index_document`'s order (`_sentences`: a sentence's
    first `MAX_PAIRS_PER_SENTENCE` concepts, the subject joining the first sentence and each one
    whose own subject is no concept)."""
    by_sentence: dict[int, list[str]] = {}
    has_subject: set[int] = set()
    for n, m in found:
        keys = by_sentence.setdefault(n, [])
        key = names.of(m.key)
        if key not in keys and len(keys) < MAX_PAIRS_PER_SENTENCE:
            keys.append(key)
        if m.subject:
            has_subject.add(n)
    pairs: dict[tuple[str, str], None] = {}
    for at, (n, keys) in enumerate(sorted(by_sentence.items())):
        joined = set(keys)
        if subject and (at == 0 or n not in has_subject):
            joined.add(subject)
        pairs.update(dict.fromkeys(combinations(sorted(joined), 2)))
    return list(pairs)
