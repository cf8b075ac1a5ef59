"""kgflow's IRIs: the deterministic IRIs of entities and relations named by plain words (a TSV field,
a concept found in a document, a typed relation's words) and readable labels back from IRIs, so
triples and documents loaded into one collection name the same thing the same way (pure)."""

from __future__ import annotations

from urllib.parse import quote, unquote

ENTITY_NS = "http://kgflow.org/e/"
RELATION_NS = "http://kgflow.org/r/"


def field_iri(field: str, ns: str = ENTITY_NS) -> str:
    """Deterministic IRI of a TSV field."""
    return ns + quote(field.strip(), safe="")


def field_label(field: str) -> str:
    """The label of a TSV field (underscores read as spaces)."""
    return field.strip().replace("_", " ")


def iri_label(iri: str) -> str:
    """A readable fallback label from an IRI's last segment."""
    tail = iri.rstrip("/#").rsplit("#", 1)[-1].rsplit("/", 1)[-1]
    return unquote(tail).replace("_", " ") or iri


RELATED_TO = RELATION_NS + "related_to"
RELATED_TO_LABEL = "related to"


def predicate_iri(words: str) -> str:
    """The IRI of a typed relation's predicate (the TSV loader's IRI for the same words)."""
    return field_iri(words.replace(" ", "_"), RELATION_NS)


def concept_iri(key: str) -> str:
    """The IRI a new concept gets (the TSV loader's IRI for the same words)."""
    return field_iri(key.replace(" ", "_"), ENTITY_NS)
