"""PathQuestion through the operator CLI contract: load the KB (TSV), answer a fixed sample of
questions with `kgflow query graph-rag --batch --no-llm --json`, check the gold answer is among
the retrieved triples' labels and the round-trip bound holds for every question."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import DATASETS

KGFLOW = str(Path(sys.executable).parent / "kgflow")
SAMPLE_EVERY = 25  # a fixed, spread-out sample: questions 0, 25, 50, ...


def gold_answers(line: str) -> set[str]:
    """Gold answer labels of a PQ line: `answer(alt1/alt2)` with `_` read as spaces."""
    field = line.split("\t")[1]
    head, _, alts = field.partition("(")
    names = {head, *alts.rstrip(")").split("/")}
    return {n.strip().replace("_", " ") for n in names if n.strip()}


def run_sample(tmp_path: Path, hops: str, path_length: int) -> tuple[float, list[dict]]:
    home = tmp_path / f"home-{hops}"
    subprocess.run(
        [
            KGFLOW,
            "load",
            "triples",
            str(DATASETS / f"{hops}-kb.txt"),
            "--collection",
            "pq",
            "--home",
            str(home),
            "--no-progress",
        ],
        check=True,
        capture_output=True,
    )
    lines = (DATASETS / f"PQ-{hops}.txt").read_text(encoding="utf-8").splitlines()[::SAMPLE_EVERY]
    batch = tmp_path / f"{hops}.txt"
    batch.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = subprocess.run(
        [
            KGFLOW,
            "query",
            "graph-rag",
            "--batch",
            str(batch),
            "--no-llm",
            "--json",
            "--collection",
            "pq",
            "--home",
            str(home),
            "--param",
            "max-subgraph-size=150",
            "--param",
            f"max-path-length={path_length}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    results = [json.loads(r) for r in out.stdout.splitlines()]
    assert [r["question"] for r in results] == [ln.split("\t")[0].strip() for ln in lines]  # in order
    hits = 0
    for line, r in zip(lines, results, strict=True):
        assert "error" not in r, r
        labels = {t[k] for t in r["triples"] for k in ("s", "o")}
        hits += bool(gold_answers(line) & labels)
    return hits / len(lines), results


@pytest.mark.parametrize(("hops", "path_length", "target"), [("2H", 2, 0.98), ("3H", 3, 0.90)])
def test_gold_answer_retrieved_within_the_path_length(
    tmp_path: Path, hops: str, path_length: int, target: float
) -> None:
    coverage, results = run_sample(tmp_path, hops, path_length)
    assert coverage >= target, f"{hops} coverage {coverage:.3f} < {target}"
    for r in results:
        st = r["stats"]
        hops = [f"hop_{i}" for i in range(1, st["levels"] + 1)]
        assert st["levels"] <= path_length and all(st["stage_store_round_trips"][h] >= 1 for h in hops)
        assert sum(st["stage_store_round_trips"].values()) == st["store_round_trips"]
        assert sum(st["stage_store_requests"].values()) == st["store_requests"] >= st["store_round_trips"]
        assert len(r["triples"]) <= 150


def test_gold_answer_parser() -> None:
    line = "q ?\tunited_kingdom(united_kingdom/great_britain)\tpath"
    assert gold_answers(line) == {"united kingdom", "great britain"}
