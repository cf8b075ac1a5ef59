"""Counts in messages a person reads: `1 document`, `2 documents`, never `1 documents`."""

from __future__ import annotations

_VOWELS = "aeiou"


def plural(n: int, noun: str, nouns: str | None = None) -> str:
    """`n` and `noun`, in its plural unless `n` is 1 (`nouns`, else `-ies` after a consonant + y, else `-s`)."""
    if n == 1:
        return f"{n} {noun}"
    if nouns is None:
        consonant_y = noun.endswith("y") and len(noun) > 1 and noun[-2] not in _VOWELS
        nouns = noun[:-1] + "ies" if consonant_y else noun + "s"
    return f"{n} {nouns}"
