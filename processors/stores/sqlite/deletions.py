"""A collection's deletion marks in docs.db (see DocumentStore.note_deleted): a row per deleted
document and one for the whole collection (id ''), each with the stamp its delete issued (`at`).
docs.db has one writer connection, so a check and the write after it in one transaction see every
delete answered before them."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence

from processors.stores.documents_protocol import COLLECTION, DeletedSince, RemovedLinks
from processors.stores.sqlite.doc_writes import unlinked
from processors.stores.sqlite.docs_schema import DELETED_AFTER, DROP_DELETION_MARKS, NOTE_DELETED, WRITE_STAMP
from processors.stores.sqlite.mention_rows import UNMENTIONED
from processors.stores.sqlite.pool import SqlitePool
from schemas.tenant import Tenant


def stamp(conn: sqlite3.Connection, tenant: Tenant) -> float:
    """The collection's write stamp: its highest mark (0 before any delete)."""
    return float(conn.execute(WRITE_STAMP, (tenant.user, tenant.collection)).fetchone()[0])


def note(conn: sqlite3.Connection, tenant: Tenant, ids: Sequence[str]) -> float:
    """Mark `ids` deleted with a new stamp; returns the stamp."""
    uc = (tenant.user, tenant.collection)
    issued = stamp(conn, tenant) + 1
    if COLLECTION in ids:  # the collection's mark outranks every document's
        conn.execute(DROP_DELETION_MARKS, uc)
    conn.executemany(NOTE_DELETED, [(*uc, i, issued) for i in dict.fromkeys(ids)])
    return issued


def deleted_after(conn: sqlite3.Connection, tenant: Tenant, ids: Sequence[str], since: float) -> set[str]:
    """Of `ids`, those marked after `since`, and COLLECTION if the collection was."""
    args = (tenant.user, tenant.collection, since, json.dumps(list(ids)))
    return {str(r[0]) for r in conn.execute(DELETED_AFTER, args)}


def check(conn: sqlite3.Connection, tenant: Tenant, ids: Sequence[str], since: float | None) -> None:
    """Raise DeletedSince when any of `ids` (or the collection) was deleted after `since` (None: a
    write with no stamp, nothing to check)."""
    gone = deleted_after(conn, tenant, ids, since) if since is not None else set()
    if gone:
        raise DeletedSince(gone)


def unsupported(
    conn: sqlite3.Connection, tenant: Tenant, candidates: RemovedLinks, created: Sequence[str]
) -> RemovedLinks:
    """doc_writes.unlinked, and of `created`, the concepts no chunk mentions (owned or not)."""
    found = unlinked(conn, tenant, candidates)
    args = (tenant.user, tenant.collection, json.dumps(list(created)))
    orphans = {str(r[0]) for r in conn.execute(UNMENTIONED, args)} if created else set()
    return RemovedLinks(found.relations, sorted(set(found.concepts) | orphans), found.touched)


class DeletionMarks:
    """The DocumentStore calls on deletion marks, of a store whose docs.db is `db`."""

    db: SqlitePool

    async def write_stamp(self, tenant: Tenant) -> float:
        """The collection's write stamp (see DocumentStore.write_stamp)."""
        return await self.db.read(lambda conn: stamp(conn, tenant))

    async def note_deleted(self, tenant: Tenant, ids: Sequence[str]) -> float:
        """Mark `ids` deleted with a new stamp (see DocumentStore.note_deleted)."""
        return await self.db.write(lambda conn: note(conn, tenant, ids))

    async def deleted_after(self, tenant: Tenant, ids: Sequence[str], since: float) -> set[str]:
        """Of `ids`, those deleted after `since`, and COLLECTION if the collection was."""
        return await self.db.read(lambda conn: deleted_after(conn, tenant, ids, since))
