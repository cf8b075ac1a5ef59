"""The index-size measure: a home's bytes per chunk and its breakdown by table and index."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from bench.documents.index_size import home_size, render


def make_db(path: Path, chunks: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE chunks (id TEXT PRIMARY KEY, text TEXT)")
    conn.execute("CREATE TABLE big (x BLOB)")
    conn.executemany("INSERT INTO chunks VALUES (?, ?)", [(str(i), "t" * 100) for i in range(chunks)])
    conn.executemany("INSERT INTO big VALUES (?)", [(b"\0" * 1536,) for _ in range(chunks * 10)])
    conn.commit()
    conn.close()


def test_home_size_breaks_down_by_table_and_index(tmp_path: Path) -> None:
    make_db(tmp_path / "docs.db", 50)
    make_db(tmp_path / "vectors.db", 5)
    size = home_size(tmp_path)
    assert size.chunks == 50  # docs.db's chunks, not the other file's
    docs = size.files["docs.db"]
    assert list(docs.by_object)[0] == "big"  # largest first
    assert docs.by_object["big"] > 50 * 10 * 1536
    assert "sqlite_autoindex_chunks_1" in docs.by_object  # indexes apart from their tables
    assert size.bytes_total == docs.bytes_in_pages + size.files["vectors.db"].bytes_in_pages
    assert size.bytes_per_chunk == round(size.bytes_total / 50, 1)
    assert "big" in render(size) and "graph.db" not in size.files
