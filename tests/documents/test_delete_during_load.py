"""A delete is final on the embedded default (memory bus, SQLite, local vectors): the scenario of
tests/documents/delete_during_load.py, with what is left counted in every SQLite file of the home."""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from processors.base.settings import RuntimeSettings
from processors.commands.load_documents import report
from processors.commands.loading import DocumentsLoaded
from processors.commands.system import System, embedded
from processors.stores.settings import StoreSettings
from tests.documents.delete_during_load import Leftovers, check_delete_during_load, check_document_delete_during_load


@pytest.fixture
async def system(tmp_path: Path) -> AsyncIterator[System]:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings()) as s:
        yield s


def sqlite_leftovers(home: Path) -> Leftovers:
    """Rows of the collection in any table of any SQLite file of `home`, but what a delete itself
    writes: its deletion marks and the graph's version (caches of the old graph are not used), and
    the record of the last load (checked apart: at most a finished one)."""

    def count(user: str, collection: str) -> dict[str, int]:
        found = {}
        for path in sorted(home.glob("*.db")):
            with sqlite3.connect(path) as conn:
                tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
                for table in tables:
                    cols = {r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")}
                    if {"user", "collection"} <= cols and table not in ("doc_deletions", "graph_version", "load_state"):
                        sql = f"SELECT count(*) FROM '{table}' WHERE user = ? AND collection = ?"
                        found[f"{path.name}:{table}"] = conn.execute(sql, (user, collection)).fetchone()[0]
        return {k: n for k, n in found.items() if n}

    return lambda user, collection: asyncio.to_thread(count, user, collection)


async def test_a_collection_deleted_during_a_load_stays_deleted(system: System, tmp_path: Path) -> None:
    await check_delete_during_load(system, "alice", sqlite_leftovers(tmp_path / "home"))


async def test_documents_deleted_during_a_load_stay_deleted(system: System) -> None:
    await check_document_delete_during_load(system, "bob")


def test_the_summary_of_a_load_whose_collection_was_deleted_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    """`kgflow load documents` says the collection was deleted, what was stored before and that
    the rest was refused; it does not say "loaded N" (those went with the collection)."""
    done = DocumentsLoaded(loaded=12, chunks=12, collection_deleted=True, refused=[f"d{n}" for n in range(36)])
    report(argparse.Namespace(user="alice", collection="delrace"), done)
    err = capsys.readouterr().err
    assert "collection alice/delrace deleted during load: 12 documents stored before (deleted with it)" in err
    assert "the rest refused (36 not stored)" in err and "loaded 12" not in err
    assert not done.complete
