"""Ranking entity-search hits and choosing where a traversal starts (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

from processors.algorithms.text_match import normalize
from schemas.graph_rag import SeedEntity


class Hit(Protocol):
    """An entity-search hit."""

    @property
    def label(self) -> str: ...

    @property
    def score(self) -> float: ...

    @property
    def lexical(self) -> bool: ...


H = TypeVar("H", bound=Hit)


def rank_entity_hits(hits: Sequence[H], limit: int) -> list[H]:
    """Entities the question names first (longer names first: "marie curie" before "curie"),
    then the nearest by vector; at most `limit`."""
    return sorted(hits, key=lambda h: (not h.lexical, -len(h.label) if h.lexical else 0, -h.score))[:limit]


def choose_anchors(seeds: list[SeedEntity]) -> list[str]:
    """Where traversal starts: the entities the question names, longest mention first, without
    those named only inside a longer mention ("austria" in "archduke johann of austria");
    the most similar entities when the question names none."""
    named = [e for e in seeds if e.lexical and e.label]
    if not named:
        return [e.id for e in seeds]
    names = [f" {normalize(e.label or '')} " for e in named]
    return [e.id for e, n in zip(named, names, strict=True) if not any(n != other and n in other for other in names)]
