"""The other names a concept goes by, found without a model (pure): the shorter forms of a
person's full name ("Neil Ellwood Peart" is also "Neil Peart"), what a sentence says it is known
as ("Giotto di Bondone, known as Giotto"), and the acronym it gives in parentheses ("Odense
Boldklub (OB)"). They become keys of the same concept, so one entity is one node whoever names
it which way."""

from __future__ import annotations

import itertools
import re

from processors.algorithms.text_match import MAX_NAME_WORDS, STOPWORDS, normalize

_NAME = r"((?:[A-Z][\w'’.-]*)(?:\s+(?:[A-Z][\w'’.-]*|de|di|da|van|von|der|la|le|del|of))*)"
_LEAD = r"^\s*(?:\([^)]{0,40}\))?\s*,?\s*(?:\(|,)?\s*"  # a parenthetical (dates) may come first
_KNOWN_AS = re.compile(
    _LEAD + r"(?:also |commonly |better |popularly |simply |professionally |often )?"
    r"(?:known|referred to|called|nicknamed|styled) as\s+[\"“']?" + _NAME
)
_BORN = re.compile(_LEAD + r"(?:(?:was|is) )?(?:née|nee|born)\s+" + _NAME)
_ACRONYM = re.compile(r"^\s*\(([A-Z][A-Z0-9&.]{1,7})[),;]")


def shorter_forms(key: str) -> list[str]:
    """A full name's forms without some of its middle names: the first and last words kept
    ("neil ellwood peart" -> "neil peart"; two-word names have none)."""
    words = key.split()
    if not 3 <= len(words) <= MAX_NAME_WORDS:
        return []
    middle = words[1:-1]
    out = [
        " ".join([words[0], *kept, words[-1]]) for n in range(len(middle)) for kept in itertools.combinations(middle, n)
    ]
    return [k for k in dict.fromkeys(out) if k != key]


def stated_names(text_after: str) -> list[str]:
    """What the text right after a name says it is known as (", known as Giotto", " (OB)")."""
    found = [m.group(1) for m in (p.match(text_after) for p in (_KNOWN_AS, _BORN, _ACRONYM)) if m]
    keys = (normalize(f) for f in found)
    return [k for k in keys if k and k not in STOPWORDS and any(c.isalpha() for c in k)]
