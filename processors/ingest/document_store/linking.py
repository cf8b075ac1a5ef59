"""Linking indexed documents into the collection's graph (pure).

A concept whose normalised label names an entity already in the collection *is* that entity;
any other concept becomes a new entity with a deterministic IRI. Co-occurrences become
`related to` relations between the two entities, one triple per unordered pair; typed
relations (the `llm` extractor's) keep their direction and get a predicate IRI from their words
(`born in` -> `http://kgflow.org/r/born_in`, the TSV loader's IRI for the same relation, so
they join triples loaded into the collection) with an rdfs:label.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from processors.algorithms.iris import RELATED_TO, RELATED_TO_LABEL, concept_iri, predicate_iri
from processors.stores.documents_protocol import DocumentRecord, Relation
from schemas.documents import IndexedDocument, Mention
from schemas.terms import RDFS_LABEL, Term, Triple


@dataclass
class Linked:
    """Documents ready to store, and what the graph gains."""

    records: list[DocumentRecord]
    new_concepts: dict[str, str] = field(default_factory=dict)  # IRI -> label (the batch's spelling_of)
    relations: set[tuple[str, str, str]] = field(default_factory=set)
    predicates: dict[str, str] = field(default_factory=dict)  # typed relations' predicate IRI -> label

    def triples(self) -> list[Triple]:
        """The new concepts' label triples (the batch's guess: their labels follow the collection's
        spellings once the documents are stored), the relation triples and their predicates' labels."""
        out = [
            Triple(s=Term.iri(i), p=Term.iri(RDFS_LABEL), o=Term.literal(lab)) for i, lab in self.new_concepts.items()
        ]
        if any(p == RELATED_TO for _, p, _ in self.relations):
            out.append(Triple(s=Term.iri(RELATED_TO), p=Term.iri(RDFS_LABEL), o=Term.literal(RELATED_TO_LABEL)))
        out += [Triple(s=Term.iri(i), p=Term.iri(RDFS_LABEL), o=Term.literal(x)) for i, x in self.predicates.items()]
        out += [Triple(s=Term.iri(s), p=Term.iri(p), o=Term.iri(o)) for s, p, o in sorted(self.relations)]
        return out


def spelling_of(counts: Mapping[str, int]) -> str:
    """A concept's label: its most frequent spelling, the least (code-point order) of those tied, so
    that it is a function of the counts alone, not of the order they were made in."""
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def link(
    documents: Sequence[IndexedDocument], named: Mapping[str, str], claimed: Collection[str] = frozenset()
) -> Linked:
    """Resolve concept keys to entities (`named`: key -> existing IRI, by the exact key) and build
    the records (an entity's aliases ride along for query-time lookups); a named entity a document
    write created (`claimed`) stays owned by documents. A key links to a document concept only if
    it is that concept's own key: one labelled by another of its names is named by that name too,
    and linking it would depend on which document came first. So one set of documents links the
    same way whatever the order or concurrency of loads. Each record counts its spellings of the
    concepts it owns (weighted by mentions), from which the store keeps their labels."""
    out = Linked([])
    new: dict[str, Counter[str]] = {}  # new concepts' spellings in the batch
    for doc in documents:
        iri: dict[str, str] = {}
        owned: set[str] = set()
        names: dict[str, list[str]] = {}
        weight = Counter[str]()
        for m in doc.mentions:
            weight[m.key] += m.count
        spellings: dict[str, Counter[str]] = {}
        for c in doc.concepts:
            if c.key in named and (named[c.key] not in claimed or named[c.key] == concept_iri(c.key)):
                iri[c.key] = named[c.key]
                if iri[c.key] in claimed:
                    owned.add(iri[c.key])
            else:
                iri[c.key] = concept_iri(c.key)
                owned.add(iri[c.key])
                new.setdefault(iri[c.key], Counter())[c.label] += max(weight[c.key], 1)
            if iri[c.key] in owned:  # (a concept loaded as triples keeps its label)
                spellings.setdefault(iri[c.key], Counter())[c.label] += max(weight[c.key], 1)
            names.setdefault(iri[c.key], []).extend([c.key, *c.aliases])
        mentions = [
            Mention(chunk_id=m.chunk_id, entity=iri[m.key], count=m.count) for m in doc.mentions if m.key in iri
        ]
        relations = []
        for co in doc.cooccurrences:
            if co.a in iri and co.b in iri and iri[co.a] != iri[co.b]:
                s, o = sorted((iri[co.a], iri[co.b]))
                relations.append(Relation(s, RELATED_TO, o, co.chunk_ids))
                out.relations.add((s, RELATED_TO, o))
        for r in doc.relations:
            if r.s in iri and r.o in iri and iri[r.s] != iri[r.o]:
                p = predicate_iri(r.p)
                relations.append(Relation(iri[r.s], p, iri[r.o], r.chunk_ids))
                out.relations.add((iri[r.s], p, iri[r.o]))
                out.predicates.setdefault(p, r.p)
        keys = {i: k for k, i in reversed(iri.items())}  # an entity's first concept gives its key
        aliases = {i: [x for x in dict.fromkeys(ns) if x != keys[i]] for i, ns in names.items()}
        out.records.append(
            DocumentRecord(doc.document, doc.content_hash, doc.chunks, doc.vectors, mentions, relations, owned,
                           keys=keys, title_entity=iri.get(doc.subject_key),
                           aliases={i: a for i, a in aliases.items() if a},
                           spellings={i: dict(n) for i, n in spellings.items()})
        )  # fmt: skip
    out.new_concepts = {i: spelling_of(n) for i, n in new.items()}
    return out


def unlinked_triples(relations: Sequence[tuple[str, str, str]], concepts: Mapping[str, str]) -> list[Triple]:
    """The triples to remove for relations no chunk supports and concepts (IRI -> label) no chunk mentions."""
    out = [Triple(s=Term.iri(s), p=Term.iri(p), o=Term.iri(o)) for s, p, o in relations]
    out += [Triple(s=Term.iri(i), p=Term.iri(RDFS_LABEL), o=Term.literal(lab)) for i, lab in concepts.items()]
    return out
