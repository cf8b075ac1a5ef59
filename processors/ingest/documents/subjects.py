"""What a document is about and which of its concepts are one entity, without a model (pure).

- One entity, one node: a person's key is their first and last name ("Marie Skłodowska-Curie" is
  "marie curie", as other documents write it; the full name is an alias), so documents name one
  node whatever their order or concurrency; within a document, a concept whose key is another
  name of a concept there — what the text says it is known as, or the surname alone of exactly
  one full name ("Peart" beside "Neil Ellwood Peart") — is that concept; its key becomes one of
  the concept's aliases (found at query time: `concept_keys`).
- The subject: the document's title when the title names something its text names, or reads as
  a name (a few capitalised words; a file name such as "TranscriptFY14Q4.txt" names nothing),
  else the concept its first sentence is about (the one that opens it, or its grammatical
  subject), the way reference text introduces its subject. A document without either has none.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from processors.algorithms.text_match import MAX_NAME_WORDS, normalize, title_key
from schemas.documents import MAX_CONCEPT_CHARS
from schemas.extraction import ConceptMention

PERSON = "entity:PERSON"


@dataclass
class Names:
    """Each key's canonical key (itself unless it names another concept) and the aliases of each
    canonical key."""

    canonical: dict[str, str] = field(default_factory=dict)
    aliases: dict[str, set[str]] = field(default_factory=dict)

    def of(self, key: str) -> str:
        """The canonical key of `key` (following a chain of names to its end)."""
        seen = {key}
        while (nxt := self.canonical.get(key)) is not None and nxt not in seen:
            key = nxt
            seen.add(key)
        return key


def one_node_per_entity(found: Sequence[Sequence[ConceptMention]]) -> Names:
    """The document's concepts merged by name (see the module docstring)."""
    mentions = [m for chunk in found for m in chunk]
    keys = list(dict.fromkeys(m.key for m in mentions))
    stated: dict[str, set[str]] = {}
    for m in mentions:
        stated.setdefault(m.key, set()).update(a for a in m.aliases if a != m.key)
    people = [k for k in keys if any(m.key == k and m.kind == PERSON for m in mentions) and len(k.split()) >= 2]
    surnames: dict[str, list[str]] = {}
    for k in people:
        surnames.setdefault(k.split()[-1], []).append(k)
    names = Names()
    for k in people:  # a person's key: their first and last name
        if len(k.split()) >= 3:
            names.canonical[k] = first_and_last(k)
    targets = set(names.canonical.values())
    for k in keys:  # a key another (longer) concept says it is also called: that concept
        if k in names.canonical or k in targets:
            continue
        owners = [o for o in keys if o != k and k in stated.get(o, ()) and len(o.split()) >= len(k.split())]
        if len(owners) == 1:
            names.canonical[k] = owners[0]
        elif len(k.split()) == 1 and len(surnames.get(k, [])) == 1:
            names.canonical[k] = surnames[k][0]
    for k in keys:
        root = names.of(k)
        names.aliases.setdefault(root, set()).update({k, *stated.get(k, ())})
    for root, al in names.aliases.items():
        al.discard(root)
    return names


def first_and_last(key: str) -> str:
    """A full name's first and last words ("neil ellwood peart" -> "neil peart")."""
    words = key.split()
    return f"{words[0]} {words[-1]}" if len(words) >= 2 else key


_FILE_NAME = re.compile(r"\.[A-Za-z0-9]{1,5}$|[/\\_]")


def reads_as_a_name(title: str) -> bool:
    """A title that names something, though the text may not repeat it (a later paragraph of an
    article about "The Laramie Project" says "The play"): a few words, most of them capitalised,
    not a file name ("TranscriptFY14Q4.txt", "q3_report")."""
    words = title.split()
    if _FILE_NAME.search(title.strip()) or not 1 <= len(words) <= MAX_NAME_WORDS:
        return False
    capitalised = sum(1 for w in words if w[:1].isupper())
    codes = [w for w in words if re.search(r"\d", w) and re.search(r"[^\W\d_]", w)]  # "Q3", "FY14"
    return capitalised * 2 > len(words) and not codes


def subject_key(title: str, text: str, found: Sequence[Sequence[ConceptMention]], names: Names) -> str:
    """The document's subject concept key, or "" (see the module docstring)."""
    words = f" {normalize(text)} "
    key = title_key(title) if title else ""
    if key and len(key) <= MAX_CONCEPT_CHARS and any(c.isalpha() for c in key):
        if f" {key} " in words or reads_as_a_name(title):
            return names.of(key)
    first = found[0] if found else []
    opening = [m for m in first if m.sentence == 0 and m.subject]
    best = next((m for m in opening if m.kind.startswith("entity:")), opening[0] if opening else None)
    return names.of(best.key) if best else ""
