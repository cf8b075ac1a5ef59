"""Does the no-model answer hold the answer? On the public doc-QA sets with gold answers (HotpotQA,
MuSiQue), the share of questions whose gold answer (any alias, normalized as
../shared/tools/docqa_eval.py does) appears in the `answer` text of `kgflow query SERVICE --no-llm`,
beside the answer's mean length (the notice line saying no model is configured left out of both):
an answer that quotes whole passages would hold more by saying more. Measured through the CLI
contract, so the same script measures any code tree (run it with PYTHONPATH set to the tree).

Measured on HotpotQA (200 questions, the embedded default, one index for both), before = the
passage list (each of the best 3 chunks cut at 300 characters, kg-query with 5 facts first), after
= the extractive answer (processors/algorithms/extractive.py): gold answer in the answer text,
mean answer characters.

    service    before           after
    kg-query   0.595, 1172 ch   0.630, 785 ch   (best 12 chunks)
    lazy-rag   0.770,  923 ch   0.745, 704 ch   (best 3 chunks; from 12: 0.695)
    drift      0.340, 1003 ch   0.590, 791 ch   (best 12 chunks)

The before answer cut mid-word ("During the "); the after one is whole sentences, each cited. MuSiQue
was not measured: its index did not finish building on the shared machine in the time there was.

usage: python -m bench no-model-answer [--homes DIR] [--sets hotpotqa,musique] [--services kg-query,lazy-rag,drift]
                                       [--sample N]
Each set is loaded once into DIR/<set> (reused when DIR/<set>/.loaded exists).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.harness.results import CACHE, DATASETS, RESULTS, write_section
from bench.harness.stats import load_average

DOCQA = DATASETS / "docqa"
SETS = {"hotpotqa": "hotpotqa_dev200_migres", "musique": "musique_train100_kag"}
COLLECTION = "docqa"
NOTICE = "No language model is configured"


def norm(text: str) -> str:
    """Lower case, punctuation to spaces, spaces closed up (docqa_eval.py's normalization)."""
    return re.sub(r"\s+", " ", re.sub(r"[^0-9a-z ]", " ", text.lower())).strip()


def kgflow() -> str:
    """The `kgflow` script beside this Python (the venv's), else the one on PATH."""
    local = Path(sys.executable).with_name("kgflow")
    return str(local) if local.exists() else (shutil.which("kgflow") or "kgflow")


def load(home: Path, dataset: Path) -> None:
    """Index the set's corpus into `home` once."""
    if (home / ".loaded").exists():
        return
    env = dict(os.environ, KGFLOW_HOME=str(home))
    cmd = [kgflow(), "load", "documents", str(dataset / "corpus.jsonl"), "--collection", COLLECTION]
    subprocess.run(cmd, env=env, check=True, capture_output=True)
    (home / ".loaded").write_text("ok")


def _body(answer: str) -> str:
    """The answer without its notice line ("No language model is configured; ..."): the notice's
    "No" would count as the gold answer of every yes/no question."""
    first, _, rest = answer.partition("\n")
    return rest if first.startswith(NOTICE) else answer


def measure(home: Path, questions: list[dict[str, Any]], service: str) -> dict[str, Any]:
    """Gold answer in the answer text, and the answer's mean length, for one service."""
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(q["question"].replace("\n", " ") for q in questions) + "\n")
    env = dict(os.environ, KGFLOW_HOME=str(home))
    cmd = [kgflow(), "query", service, "--batch", f.name, "--json", "--no-llm", "--collection", COLLECTION]
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True).stdout
    os.unlink(f.name)
    answers = [_body(json.loads(line)["answer"]) for line in out.splitlines() if line.startswith("{")]
    if len(answers) != len(questions):
        raise RuntimeError(f"{len(answers)} answers for {len(questions)} questions")
    hits = [any(norm(g) and norm(g) in norm(a) for g in q["answers"]) for q, a in zip(questions, answers, strict=True)]
    return {
        "gold_in_answer": round(sum(hits) / len(hits), 4),
        "mean_answer_chars": round(sum(len(a) for a in answers) / len(answers)),
        "questions": len(answers),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Load each set (once), ask every question of it with no model; one JSON line per set and
    service, and the `no_model_answer` key of bench/results.json."""
    ap = argparse.ArgumentParser(prog="python -m bench no-model-answer")
    ap.add_argument("--homes", type=Path, default=CACHE / "no_model_answer")
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--services", default="kg-query,lazy-rag,drift")
    ap.add_argument("--sample", type=int, default=0)
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    load_at_start = load_average()
    section: dict[str, Any] = {}
    for name in a.sets.split(","):
        dataset, home = DOCQA / SETS[name], a.homes / SETS[name]
        home.mkdir(parents=True, exist_ok=True)
        load(home, dataset)
        qs = [json.loads(line) for line in (dataset / "questions.jsonl").open()]
        qs = [q for q in qs if q.get("answers")]
        if a.sample and a.sample < len(qs):
            qs = random.Random(0).sample(qs, a.sample)
        for service in a.services.split(","):
            section.setdefault(name, {})[service] = measure(home, qs, service)
            print(json.dumps({"set": name, "service": service, **section[name][service]}), flush=True)
    write_section(a.out, "no_model_answer", section, load_at_start)
    return section
