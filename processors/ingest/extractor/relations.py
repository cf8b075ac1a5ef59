"""Typed relations from a model's reply (the `llm` extractor), as pure functions.

`parse_relations` reads a reply leniently — code fences stripped, the first JSON array (or
`{"relations": [...]}`) taken, the complete items of a cut-off reply kept — and validates each
item. `resolve_relations` maps the ends to concept keys with the concept extractor's
normalisation (`text_match.normalize`), so they join the concept graph and match entities
already in the collection; an end the chunk does not name is dropped (the model made it up, and
a relation must have provenance in its chunk).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from processors.algorithms.text_match import STOPWORDS, normalize
from processors.ingest.extractor.concepts import GENERIC, MAX_WORDS
from processors.ingest.extractor.prompts import MAX_END_CHARS, MAX_PREDICATE_CHARS, MAX_RELATIONS
from schemas.extraction import ConceptMention

_FENCE = re.compile(r"```[a-zA-Z]*\s*(.*?)(?:```|$)", re.DOTALL)
_LEADING = re.compile(r"^(?:the|a|an|this|that|these|those|his|her|its|their|our|my|your)\s+", re.IGNORECASE)
CO_OCCURRENCE = "related to"  # co-occurrence's own predicate: a typed relation must say more
LLM_KIND = "llm"  # the kind of a mention only a model's relation found
MAX_ITEMS = 4 * MAX_RELATIONS  # items read from one reply (a looping model repeats itself)


class RelationsParseError(ValueError):
    """A reply with no JSON relations in it."""


class RawRelation(BaseModel):
    """One item of a reply, as the model wrote it."""

    model_config = ConfigDict(extra="ignore", str_strip_whitespace=True)

    subject: str
    predicate: str
    object: str

    @field_validator("subject", "object")
    @classmethod
    def _end(cls, v: str) -> str:
        if not v or len(v) > MAX_END_CHARS:
            raise ValueError(f"an end must have 1 to {MAX_END_CHARS} characters")
        return v

    @field_validator("predicate")
    @classmethod
    def _predicate(cls, v: str) -> str:
        if not v or len(v) > MAX_PREDICATE_CHARS:
            raise ValueError(f"a predicate must have 1 to {MAX_PREDICATE_CHARS} characters")
        return v


@dataclass(frozen=True)
class FoundRelation:
    """A relation between two concepts (by key) a chunk states; `p` is the predicate's words."""

    s: str
    p: str
    o: str


def _items(value: Any) -> list[Any] | None:
    """The relation items of a decoded JSON value (a list, or an object holding one)."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        inner = value.get("relations", value.get("triples"))
        if isinstance(inner, list):
            return inner
        if {"subject", "predicate", "object"} <= value.keys():
            return [value]
    return None


def _decoded(text: str) -> list[Any] | None:
    """The first JSON array (or relations object) in `text`, else the complete objects of a cut-off one."""
    decoder = json.JSONDecoder()
    for at in (m.start() for m in re.finditer(r"[\[{]", text)):
        try:
            value, _ = decoder.raw_decode(text, at)
        except ValueError:
            continue
        if (found := _items(value)) is not None:
            return found
    salvaged = []
    for at in (m.start() for m in re.finditer(r"{", text)):
        try:
            value, _ = decoder.raw_decode(text, at)
        except ValueError:
            continue
        if isinstance(value, dict) and {"subject", "predicate", "object"} <= value.keys():
            salvaged.append(value)
    return salvaged or None


def parse_relations(reply: str) -> tuple[list[RawRelation], int]:
    """The valid relations of a model's reply and how many items were invalid; raises
    `RelationsParseError` when the reply holds no JSON relations at all."""
    fenced = _FENCE.search(reply)
    text = fenced.group(1) if fenced else reply
    items = _decoded(text)
    if items is None and fenced:
        items = _decoded(reply)
    if items is None:
        raise RelationsParseError(f"no JSON relations in the reply ({len(reply)} characters)")
    out, invalid = [], 0
    for item in items[:MAX_ITEMS]:
        try:
            out.append(RawRelation.model_validate(item))
        except ValidationError:
            invalid += 1
    return out, invalid


def end_key(name: str) -> str | None:
    """The concept key of a relation end (None if it cannot be a concept): leading determiners
    dropped, normalised as concept keys are, at most `MAX_WORDS` words, not only stopwords."""
    key = normalize(_LEADING.sub("", name.strip()))
    words = key.split()
    if len(key) < 2 or len(words) > MAX_WORDS or not any(c.isalpha() for c in key):
        return None
    if all(w in STOPWORDS or w in GENERIC for w in words):
        return None
    return key


def predicate_words(predicate: str) -> str | None:
    """The predicate's normalised words (None if it has none or is co-occurrence's own)."""
    words = normalize(predicate)
    if not any(c.isalpha() for c in words) or len(words.split()) > MAX_WORDS or words == CO_OCCURRENCE:
        return None
    return words


def resolve_relations(
    raw: Iterable[RawRelation], text: str, known: Mapping[str, str]
) -> tuple[list[FoundRelation], list[ConceptMention], Counter[str]]:
    """Relations between concepts of the chunk `text` (`known`: the keys of its concepts and its
    title's, with labels): an end that is not a known concept but that the text names becomes a
    new mention; the others are dropped, counted by reason."""
    words = f" {normalize(text)} "
    found: dict[FoundRelation, None] = {}
    added: dict[str, ConceptMention] = {}
    dropped: Counter[str] = Counter()
    for r in raw:
        s, o, p = end_key(r.subject), end_key(r.object), predicate_words(r.predicate)
        if s is None or o is None:
            dropped["end is not a name"] += 1
            continue
        if p is None:
            dropped["no predicate"] += 1
            continue
        if s == o:
            dropped["subject is the object"] += 1
            continue
        unnamed = [k for k in (s, o) if k not in known and f" {k} " not in words]
        if unnamed:
            dropped["end not named in the chunk"] += 1
            continue
        for key, label in ((s, r.subject), (o, r.object)):
            if key not in known and key not in added:
                added[key] = ConceptMention(key=key, label=_LEADING.sub("", label), sentence=-1, kind=LLM_KIND)
        found[FoundRelation(s, p, o)] = None
    return list(found), list(added.values()), dropped
