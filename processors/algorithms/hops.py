"""Question decomposition without a model (pure): the hops a multi-hop question chains.

A compositional question describes its answer through a chain of relations: "Who is the sibling of
the performer of Decade?" asks for the performer of Decade (the first hop, the one that names
something), then that person's sibling. The chain is in the question's function words:

- "of" before a determiner and a common noun ("... of the performer", "... of the state") starts
  an inner description: the thing described by what follows. "of" before a name ("of Decade",
  "of Meehan Bonnar") or a number ("Act of 1869") stays inside its hop.
- A relative word (where, that, which, who, whose, whom, "in which") starts a clause describing
  the noun just before it ("the state where X is located"): that noun goes with the clause.
- A part that says nothing but its head noun ("of the actor" before "who plays ...") is not a hop
  of its own: it stays with the part before it.

`decompose` returns the hops innermost first: the first is searched as it is; each later one is
searched once per name the previous hop's passages give (the bridge), with that name added.
"""

from __future__ import annotations

import re

from processors.algorithms.text_match import STOPWORDS

MAX_HOPS = 4  # a question is not read as more hops than this (MuSiQue asks 2-4)
_WORD = re.compile(r"[^\s?!.,;:]+(?:\.(?=\S))?[^\s?!,;:]*")  # words, keeping "B." and "U.S." whole
RELATIVES = frozenset("where that which who whose whom".split())
_PREPOSITIONS = frozenset("in of on at from for to by with into".split())  # "in which", "of whom"
_DETERMINERS = frozenset("the a an".split())


def words(text: str) -> list[str]:
    """The words of `text` (punctuation at their ends dropped)."""
    return [w.strip("\"'()") for w in _WORD.findall(text) if w.strip("\"'()")]


def _starts_description(ws: list[str], i: int) -> bool:
    """Whether "of" at `i` starts an inner description: a determiner and a lower-case word follow."""
    return (
        ws[i].lower() == "of"
        and i + 2 < len(ws)
        and ws[i + 1].lower() in _DETERMINERS
        and ws[i + 2][:1].islower()
        and ws[i + 2].lower() not in STOPWORDS
    )


def _cuts(ws: list[str]) -> list[tuple[int, bool]]:
    """Where the question's parts start: (index, whether a relative clause starts there)."""
    out: list[tuple[int, bool]] = []
    for i in range(1, len(ws)):
        w = ws[i].lower()
        if w in RELATIVES and ws[i - 1].lower() not in _PREPOSITIONS:
            out.append((i, True))
        elif w in _PREPOSITIONS and i + 1 < len(ws) and ws[i + 1].lower() in RELATIVES:
            out.append((i, True))
        elif _starts_description(ws, i):
            out.append((i, False))
    return out


def _head(part: list[str]) -> list[str]:
    """The noun a relative clause after `part` describes: its words after the last determiner or
    preposition ("the population of the state" -> "state"), at most 3."""
    for j in range(len(part) - 1, -1, -1):
        if part[j].lower() in _DETERMINERS or part[j].lower() in _PREPOSITIONS:
            return part[j + 1 :][-3:]
    return part[-1:]


def _content(part: list[str]) -> list[str]:
    return [w for w in part if w.lower() not in STOPWORDS]


def decompose(question: str) -> list[str]:
    """The hops of `question`, innermost first (see the module docstring); [] when it does not
    chain (one hop). Every hop after the first is searched with the bridge name added."""
    ws = words(question)
    bounds = [0, *(i for i, _ in _cuts(ws)), len(ws)]
    relative = {i for i, rel in _cuts(ws) if rel}
    parts = [ws[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if a < b]
    starts = [a for a, b in zip(bounds, bounds[1:], strict=False) if a < b]
    merged: list[list[str]] = []
    for k, part in enumerate(parts):
        if k + 1 < len(parts) and starts[k + 1] in relative and len(_content(part)) <= 1 and merged:
            merged[-1] = merged[-1] + part  # only the head noun of the clause that follows: not a hop
        elif not _content(part) and merged:
            merged[-1] = merged[-1] + part
        else:
            merged.append(list(part))
            if k and starts[k] in relative:
                merged[-1] = _head(merged[-2]) + merged[-1]
    hops = [" ".join(_content(p)) for p in reversed(merged) if _content(p)]
    return hops[:MAX_HOPS] if len(hops) > 1 else []


def hop_query(hop: str, bridge: str) -> str:
    """The search for a later hop once the previous hop found `bridge`: the name, then the hop's
    own words."""
    return f"{bridge} {hop}".strip()
