"""drift's progress reports (bus-free): spec 004's phases in order, with percentages that never go
back, and a short line for a person (citations as `[document] "excerpt"` after a follow-up,
deduplicated document names when aggregating and on completion)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from processors.algorithms.wording import plural
from schemas.drift import DriftProgress, FollowUp, Phase
from schemas.retrieval import Citation

PCT: dict[Phase, int] = {
    "initializing": 0,
    "expanding_query": 20,
    "retrieving_communities": 40,
    "executing_followup": 40,  # to 80 as follow-ups finish
    "aggregating_results": 90,
    "completed": 100,
}
FOLLOWUPS_TO = 80
SUMMARY_CHARS = 300
EXCERPT_CHARS = 80


class Progress:
    """The progress reports of one search, handed to `emit` as they happen."""

    def __init__(self, emit: Callable[[DriftProgress], None]) -> None:
        self.emit = emit
        self.pct = 0
        self.planned = 1
        self.done = 0

    def phase(self, phase: Phase, summary: str, details: str = "") -> None:
        """Enter (or report again within) `phase`."""
        self._send(phase, PCT.get(phase, self.pct), summary, details)

    def plan(self, followups: int) -> None:
        """At most this many follow-ups will run (the percentage moves 40 -> 80 across them)."""
        self.planned = max(1, followups)

    def followup_done(self, node: FollowUp) -> None:
        """One more follow-up finished."""
        self.done += 1
        span = FOLLOWUPS_TO - PCT["executing_followup"]
        pct = PCT["executing_followup"] + span * min(self.done, self.planned) // self.planned
        cited = [c for c in node.citations if isinstance(c, Citation)]
        details = "\n".join(f'- [{c.document_name}] "{c.span[:EXCERPT_CHARS]}"' for c in cited)
        found = plural(len(node.chunks), "chunk") + (f", confidence {node.confidence:.2f}" if node.answer else "")
        self._send("executing_followup", pct, f'Follow-up {self.done}: "{node.question}" ({found})', details)

    def community_searched(self, communities: list[str], chunks: int) -> None:
        """One more community searched for the question itself (no model: no follow-up questions)."""
        self.done += 1
        span = FOLLOWUPS_TO - PCT["executing_followup"]
        pct = PCT["executing_followup"] + span * min(self.done, self.planned) // self.planned
        where = ", ".join(communities) or "the whole scope"
        self._send(
            "executing_followup", pct, f"Searched community {where} for the question ({plural(chunks, 'chunk')})", ""
        )

    def error(self, message: str) -> None:
        """The search failed (the percentage stays where it was)."""
        self._send("error", self.pct, message, "")

    def _send(self, phase: Phase, pct: int, summary: str, details: str) -> None:
        self.pct = max(self.pct, pct)
        self.emit(
            DriftProgress(
                phase=phase,
                progress_pct=self.pct,
                thought_summary=summary[:SUMMARY_CHARS],
                details_md=details,
                timestamp=datetime.now(UTC),
            )
        )


def document_names(citations: Iterable[Citation | str], brackets: bool = False) -> str:
    """The distinct document names of citations, in order (`[a], [b]` with `brackets`)."""
    names = list(dict.fromkeys(c.document_name for c in citations if isinstance(c, Citation) and c.document_name))
    return ", ".join(f"[{n}]" if brackets else n for n in names)
