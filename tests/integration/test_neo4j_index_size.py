"""`python -m bench index-size` on Neo4j (issue 38: bytes per chunk measured): the database
directory's files by kind and each index's directory by name, over the database's chunks, and
each label's records estimated from counts x sampled record sizes — on the real server's
directory, and the arithmetic on a directory laid out as Neo4j lays it out."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from bench.documents.index_size import (
    DYNAMIC_RECORD,
    NODE_RECORD,
    PROPERTY_RECORD,
    deployed_database_dir,
    disk_bytes,
    neo4j_size,
    record_bytes,
)
from processors.stores.neo4j.documents import Neo4jDocumentStore
from processors.stores.neo4j.schema import Neo4jConnection
from schemas.tenant import Tenant
from tests.conftest import Servers
from tests.integration.doc_store_fixtures import record
from tests.integration.store_fixtures import unit


def test_files_are_summed_by_kind_and_index_directories_by_name(tmp_path: Path) -> None:
    sizes = {"neostore.nodestore.db": 150, "neostore.propertystore.db.strings": 1280, "neostore.counts.db": 7,
             "neostore.relationshipstore.db": 340, "neostore.relationshipgroupstore.db": 10,
             "id-buffer.tmp.0": 99}  # fmt: skip
    for name, n in sizes.items():
        (tmp_path / name).write_bytes(b"x" * n)
    for provider, index, files in (("vector-2.0", "7", (100, 20)), ("range-1.0", "3", (50,)), ("range-1.0", "9", (1,))):
        d = tmp_path / "schema" / "index" / provider / index / "sub"
        d.mkdir(parents=True)
        for i, n in enumerate(files):
            (d / f"f{i}").write_bytes(b"x" * n)
    kinds, indexes = disk_bytes(tmp_path, {7: "kg_chunk_embedding", 3: "kg_chunk_key"})
    assert kinds == {"nodes": 150, "strings": 1280, "other": 7, "relationships": 350}  # the id buffer left out
    assert indexes == {"kg_chunk_embedding": 120, "kg_chunk_key": 50, "9": 1}


def test_a_records_bytes_count_its_property_blocks_and_dynamic_records() -> None:
    vector = [0.5] * 384  # 384 x 8 bytes + a header: 26 array records of 120 bytes
    node = {"user": "u", "text": "t" * 130, "embedding": vector, "key": "0123456789abcdef" * 2, "n": 3}
    # five properties, the hex key 2 blocks more (128 bits inline): 7 blocks, 2 property records;
    # the text 2 string records, the vector 26 array records
    assert record_bytes(node, NODE_RECORD) == NODE_RECORD + 2 * PROPERTY_RECORD + (2 + 26) * DYNAMIC_RECORD


@pytest.mark.usefixtures("servers")
async def test_the_real_database_directory_is_measured(servers: Servers) -> None:
    database_dir = deployed_database_dir()
    assert database_dir.is_dir(), "the deploy's Neo4j keeps its database here"
    store = Neo4jDocumentStore(Neo4jConnection(servers.neo4j_url))
    tenant = Tenant(f"size-{uuid.uuid4().hex[:8]}", "c")
    try:
        await store.store(tenant, [record(f"d{i}", ["a river", "a bridge"], [unit(i), unit(i + 1)]) for i in range(3)])
        size = await neo4j_size(servers.neo4j_url, tenant.user, tenant.collection, database_dir)
    finally:
        await store.delete_collection(tenant)
        await store.close()
    assert size.chunks == 6 and size.nodes_by_label["KgChunk"] == 6 and size.nodes_by_label["KgDocument"] == 3
    assert size.database_chunks >= 6 and size.relationships_by_type["HAS_CHUNK"] == 6
    assert {"kg_chunk_embedding", "kg_chunk_text", "kg_chunk_key"} <= set(size.index_bytes)
    assert size.store_bytes_by_kind["nodes"] > 0 and size.store_bytes == sum(size.store_bytes_by_kind.values()) + sum(
        size.index_bytes.values()
    )
    assert size.store_bytes and size.bytes_per_chunk == round(size.store_bytes / size.database_chunks, 1)
    # a chunk's records: its text and terms, a 384-float vector (the sample reads it as floats)
    assert size.estimated_bytes_by_label["KgChunk"] > 6 * 26 * DYNAMIC_RECORD
