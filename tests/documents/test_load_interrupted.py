"""A `kgflow load documents` killed mid-load, then run again, ends exactly where one clean load ends:
the same documents, chunks and communities, and the same answers (the real CLI, SIGKILL)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

KGFLOW = Path(sys.executable).parent / "kgflow"
CORPUS = Path(__file__).resolve().parents[3] / "shared" / "datasets" / "docqa" / "hotpotqa_dev200_migres"
DOCS = 100  # two request batches (at most 64 documents each)
QUESTIONS = ["Which band was Jeff Porcaro the drummer of?", "Who directed the film?", "Where was the singer born?"]


def cli(home: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGFLOW_LLM")}
    return subprocess.run(
        [str(KGFLOW), *args, "--home", str(home)], capture_output=True, text=True, timeout=timeout, env=env
    )


def stored(home: Path) -> int:
    """Documents committed so far (read beside the running load; SQLite's WAL allows it)."""
    db = home / "docs.db"
    if not db.exists():
        return 0
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return int(conn.execute("SELECT count(*) FROM documents").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is being created
        return 0


def state(home: Path) -> tuple[list[tuple[str, str]], list[str], int, int]:
    """(document id, content hash) pairs, chunk ids, communities, stale communities."""
    with sqlite3.connect(home / "docs.db") as conn:
        docs = conn.execute("SELECT id, content_hash FROM documents ORDER BY id").fetchall()
        chunks = [r[0] for r in conn.execute("SELECT id FROM chunks ORDER BY id")]
        communities, stale = conn.execute("SELECT count(*), coalesce(sum(stale), 0) FROM communities").fetchone()
    return [tuple(d) for d in docs], chunks, int(communities), int(stale)


def answers(home: Path, batch: Path) -> list[list[str]]:
    done = cli(home, "query", "lazy-rag", "--batch", str(batch), "-C", "c", "--json", "--no-llm")
    assert done.returncode == 0, done.stderr
    return [[d["id"] for d in json.loads(line)["documents"]] for line in done.stdout.splitlines()]


def test_a_killed_load_run_again_ends_like_a_clean_load(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus.jsonl"
    lines = (CORPUS / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:DOCS]
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    assert cli(clean, "load", "documents", str(corpus), "-C", "c", "--no-progress").returncode == 0

    env = {k: v for k, v in os.environ.items() if not k.startswith("KGFLOW_LLM")}
    cmd = [str(KGFLOW), "load", "documents", str(corpus), "-C", "c", "--no-progress", "--home", str(killed)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 600
    while stored(killed) == 0 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = stored(killed)
    assert 0 < first < DOCS, f"the kill came after {first} of {DOCS} documents: not mid-load"

    again = cli(killed, "load", "documents", str(corpus), "-C", "c", "--no-progress")
    assert again.returncode == 0, again.stderr
    assert f"loaded {DOCS - first} documents" in again.stderr and f"{first} unchanged" in again.stderr, again.stderr

    want, got = state(clean), state(killed)
    assert got[:2] == want[:2]  # the same documents (by content) and chunks, nothing twice
    assert got[2] == want[2] > 0 and got[3] == 0  # communities rebuilt, none stale
    batch = tmp_path / "questions.txt"
    batch.write_text("\n".join(QUESTIONS) + "\n", encoding="utf-8")
    assert answers(killed, batch) == answers(clean, batch)
