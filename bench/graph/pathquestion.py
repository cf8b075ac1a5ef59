"""PathQuestion (2H / 3H): the knowledge base loaded through the real loader (cached), the
questions with their gold answers, and answer coverage of a retrieval.

A question line is `question<TAB>answer(aliases)<TAB>path`, the path `e0#r1#e1#...#<end>#eN`.
The gold answer is the label of the path's answer entity (the field with `_` read as a space,
as the TSV loader labels it); a retrieval covers a question when that label is among the
s/p/o labels of its retrieved triples.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from bench.graph.graphs import CACHE_DIR
from bench.harness.results import DATASETS as SHARED
from processors.algorithms.iris import field_label

DATASETS = SHARED / "pathquestion"


@dataclass
class PQQuestion:
    """A PathQuestion question and its gold answer label."""

    question: str
    answer: str
    hops: int


def parse_questions(lines: Iterable[str]) -> list[PQQuestion]:
    """Questions from PQ-*.txt lines (blank or malformed lines skipped)."""
    out: list[PQQuestion] = []
    for line in lines:
        parts = line.rstrip("\n\r").split("\t")
        if len(parts) < 3 or not parts[0].strip():
            continue
        path = parts[2].split("#")
        answer = path[-1] if path[-1] and path[-1] != "<end>" else parts[1].split("(", 1)[0]
        hops = (path.index("<end>") if "<end>" in path else len(path)) // 2
        out.append(PQQuestion(parts[0].strip(), field_label(answer), hops))
    return out


def questions(hops: int, datasets: Path = DATASETS) -> list[PQQuestion]:
    """The PQ-<hops>H questions."""
    return parse_questions((datasets / f"PQ-{hops}H.txt").read_text(encoding="utf-8").splitlines())


def covered(answer: str, triples: Iterable[tuple[str, str, str]]) -> bool:
    """Whether `answer` is one of the labels of the triples (case-insensitive)."""
    want = answer.strip().lower()
    return any(want in (s.strip().lower(), p.strip().lower(), o.strip().lower()) for s, p, o in triples)


def collection(hops: int) -> str:
    """Collection name of the PQ-<hops>H knowledge base."""
    return f"pathquestion-{hops}h"


async def ensure_loaded(
    hops: int, cache_dir: Path = CACHE_DIR, datasets: Path = DATASETS, log=print
) -> tuple[Path, dict]:  # type: ignore[no-untyped-def, type-arg]
    """The store home holding the <hops>H knowledge base (loaded once, cached by content + schema)."""
    from processors.models.embeddings.model import OnnxMiniLM
    from processors.stores.local import entity_index as local_index
    from processors.stores.sqlite import triples as sqlite_triples

    kb = datasets / f"{hops}H-kb.txt"
    h = hashlib.sha256(kb.read_bytes())
    for part in (sqlite_triples.SCHEMA, local_index.SCHEMA, OnnxMiniLM.model):
        h.update(part.encode())
    home = cache_dir / f"{collection(hops)}-{h.hexdigest()[:16]}"
    marker = home / "loaded.json"
    if marker.exists():
        return home, json.loads(marker.read_text())
    from bench.graph.graphs import load_in_process
    from processors.ingest.triples.readers import read_triples
    from processors.stores.settings import StoreSettings

    if home.exists():
        shutil.rmtree(home)
    t = time.perf_counter()
    counts = await load_in_process(StoreSettings(home=home), collection(hops), read_triples(kb, "tsv"))
    info = {"load_s": round(time.perf_counter() - t, 1), "counts": asdict(counts)}
    marker.write_text(json.dumps(info))
    log(f"[bench] {collection(hops)}: loaded {counts} in {info['load_s']}s")
    return home, info
