"""The bench reads a CLI batch's latencies as ../shared/tools/docqa_eval.py does: `stats.elapsed_ms`
of each JSON answer line, in order, other lines ignored."""

from __future__ import annotations

import json

from bench.docqa.cli_latency import elapsed_of


def test_elapsed_of_reads_each_answer_line_in_order() -> None:
    lines = [
        json.dumps({"question": "a", "stats": {"elapsed_ms": 120.5}}),
        "answered 3 questions",  # stderr-like text that reached stdout is not an answer
        json.dumps({"question": "b", "stats": {"elapsed_ms": 80}}),
        json.dumps({"question": "c", "error": {"type": "timeout", "message": "x"}}),  # no stats: not counted
    ]
    assert elapsed_of("\n".join(lines)) == [120.5, 80.0]
