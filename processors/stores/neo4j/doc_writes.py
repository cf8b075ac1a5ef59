"""The document store's writes on Neo4j: the Cypher that replaces or deletes documents and the
rows one write sends (documents, chunks with their tenant token and BM25 terms, subjects,
mentions, relation sources), and what a replaced or deleted version leaves unlinked.

A relation is one `KG_REL {p, src}` edge between its ends' entity nodes (see relations.py): `src`
holds each source chunk's number once. A chunk's relations are the edges between the entities it
links (HAS_ENTITY, or REL_END for an end of a relation it is a source of but does not mention, as
a model-extracted relation's may be) whose `src` holds its number: that is how a replaced or
deleted chunk's numbers are found and taken off, with no index over the edges."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from processors.algorithms.bm25 import terms
from processors.stores.documents_protocol import DocumentRecord, RemovedLinks
from processors.stores.neo4j.relations import Triple, relation_rows
from processors.stores.neo4j.schema import Runner, entity_key, node_key, stored_vector
from processors.stores.neo4j.scope import meta_pairs
from processors.stores.neo4j.spellings import doc_spellings
from schemas.tenant import Tenant

_OLD_CHUNKS = (
    "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
    "MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) "
)
# A store first write-locks its documents (creating the new ones), so two stores of one document
# (a redelivered batch, a retry after a timeout) run one after the other: the second reads and
# replaces what the first wrote instead of adding its mentions beside them.
LOCK_DOCS = (
    "UNWIND $dkeys AS dk MERGE (d:KgDocument {key: dk}) ON CREATE SET d.user = $user, d.collection = $collection "
    "SET d.writing = true REMOVE d.writing"
)
# What the documents' current chunks link (candidates for RemovedLinks); each chunk's number is
# taken off its relations' sources here (the chunk is replaced or deleted in this transaction).
OLD_LINKS = (
    _OLD_CHUNKS + "CALL (c) { MATCH (c)-[:HAS_ENTITY|REL_END]->(s:KgEntity) "
    "MATCH (c)-[:HAS_ENTITY|REL_END]->(o:KgEntity) "
    "MATCH (s)-[r:KG_REL]->(o) WHERE c.n IN r.src SET r.src = [n IN r.src WHERE n <> c.n] "
    "RETURN collect([s.uri, r.p, o.uri]) AS rels } "
    "CALL (c) { MATCH (c)-[:HAS_ENTITY]->(e:KgEntity) RETURN collect([e.key, e.uri]) AS ents } "
    "RETURN rels, ents"
)
# Replacing: the old chunks lose their links; those the new version does not have go.
CLEAR_CHUNKS = (
    "UNWIND $docs AS row MATCH (d:KgDocument {key: row.key}) WHERE d.user = $user AND d.collection = $collection "
    "MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) CALL (c) { MATCH (c)-[x:HAS_ENTITY|REL_END|ABOUT]->() DELETE x } "
    "WITH c, row WHERE NOT c.key IN row.chunk_keys DETACH DELETE c"
)
DELETE_DOCS = (
    "UNWIND $dkeys AS dk MATCH (d:KgDocument {key: dk}) WHERE d.user = $user AND d.collection = $collection "
    "CALL (d) { MATCH (d)-[:HAS_CHUNK]->(c:KgChunk) DETACH DELETE c } DETACH DELETE d"
)
WRITE_DOCS = (
    "UNWIND $docs AS row MERGE (d:KgDocument {key: row.key}) "
    "SET d.user = $user, d.collection = $collection, d += row.props"
)
# The batch's entities, each once (in key order: concurrent writers lock them in one order), with
# the mention that comes first's ownership and the first concept key the mentions give; returned
# in that order, so a link names its entity by position and no second index seek finds it.
WRITE_ENTITIES = (
    "UNWIND range(0, size($entities) - 1) AS i WITH i, $entities[i] AS row "
    "MERGE (e:KgEntity {key: row.ekey}) ON CREATE SET e.user = $user, e.collection = $collection, e.uri = row.iri "
    "SET e.concept = coalesce(e.concept, row.owned), e.concept_key = coalesce(e.concept_key, row.concept_key) "
    "WITH i, e ORDER BY i RETURN collect(e) AS ents"
)
# A relation is an edge between its ends carrying its source chunks' numbers (each once: a number
# already there, which OLD_LINKS took off a rewritten chunk's relations, is not added again).
WRITE_RELATIONS = (
    "UNWIND $relations AS row "
    "MERGE (s:KgEntity {key: row.sk}) ON CREATE SET s.user = $user, s.collection = $collection, s.uri = row.s "
    "MERGE (o:KgEntity {key: row.ok}) ON CREATE SET o.user = $user, o.collection = $collection, o.uri = row.o "
    "MERGE (s)-[r:KG_REL {p: row.p}]->(o) ON CREATE SET r.src = row.src "
    "ON MATCH SET r.src = r.src + [n IN row.src WHERE NOT n IN r.src]"
)
# A chunk and its links: mentions name their entity by its position in `ents`; the ends of its
# relations it does not mention (REL_END) by key. The links are CREATEd: CLEAR_CHUNKS took a
# replaced document's chunks' links away in this transaction and write_rows gives each link once,
# so none exists yet.
# Links carry no tenant (their ends do; see documents.py).
# The vector as the entity index writes its own (cypher._SET_VECTOR): float32 through
# db.create.setNodeVectorProperty, half the bytes of the float64 list a SET of a Bolt list stores.
_LINKS = (
    "CALL (c, row, ents) { UNWIND row.mentions AS m WITH c, m, ents[m[0]] AS e "
    "CREATE (c)-[:HAS_ENTITY {count: m[1]}]->(e) } "
    "CALL (c, row) { UNWIND row.subjects AS k MATCH (e:KgEntity {key: k}) "
    "CREATE (c)-[:ABOUT]->(e) } "
    "CALL (c, row) { UNWIND row.ends AS k MATCH (e:KgEntity {key: k}) "
    "CREATE (c)-[:REL_END]->(e) } "
)
WRITE_CHUNKS = (
    "UNWIND $chunks AS row MATCH (d:KgDocument {key: row.dkey}) MERGE (c:KgChunk {key: row.key}) "
    "SET c.user = $user, c.collection = $collection, c.tenant = $tenant, c += row.props, "
    "c.embedding = CASE WHEN row.vec IS NULL THEN null ELSE c.embedding END "
    "MERGE (d)-[:HAS_CHUNK]->(c) "
    "WITH c, row "
    + _LINKS
    + "WITH c, row WHERE row.vec IS NOT NULL CALL db.create.setNodeVectorProperty(c, 'embedding', row.vec)"
)
# Every key a concept is found by (its own and its aliases) names it: (:KgName)-[:NAME_OF]->(:KgEntity).
WRITE_NAMES = (
    "UNWIND $names AS row WITH row, ents[row.entity] AS e MERGE (n:KgName {key: row.nkey}) "
    "ON CREATE SET n.user = $user, n.collection = $collection, n.name = row.name "
    "MERGE (n)-[:NAME_OF]->(e)"
)
# Everything a store writes, in one query.
WRITE = (
    "CALL () { " + WRITE_DOCS + " } CALL () { " + WRITE_ENTITIES + " } CALL () { " + WRITE_RELATIONS + " } "
    "CALL (ents) { " + WRITE_CHUNKS + " } CALL (ents) { " + WRITE_NAMES + " }"
)
# Of the candidates: relations no chunk supports any more (deleted, returned; an end only they and
# no mention, label or vector kept goes too) and entities no chunk mentions (their concept flag
# goes; nodes nothing else uses go too).
UNSUPPORTED = (
    "UNWIND $rels AS x MATCH (s:KgEntity {key: x.sk}) WHERE s.user = $user AND s.collection = $collection "
    "MATCH (s)-[r:KG_REL {p: x.p}]->(o:KgEntity {key: x.ok}) WHERE size(r.src) = 0 DELETE r "
    "WITH collect([x.s, x.p, x.o]) AS gone, collect(s) + collect(o) AS ends "
    "CALL (ends) { UNWIND ends AS e WITH DISTINCT e WHERE e.label IS NULL AND e.embedding IS NULL "
    "AND e.concept IS NULL AND NOT (e)--() DELETE e } "
    "UNWIND gone AS t RETURN t[0] AS s, t[1] AS p, t[2] AS o"
)
UNMENTIONED = (
    "UNWIND $ekeys AS k MATCH (e:KgEntity {key: k}) WHERE e.user = $user AND e.collection = $collection "
    "AND NOT EXISTS { (:KgChunk)-[:HAS_ENTITY]->(e) } "
    "WITH e, e.uri AS iri, coalesce(e.concept, false) AS owned REMOVE e.concept "
    "WITH e, iri, owned CALL (e) { MATCH (n:KgName)-[:NAME_OF]->(e) DETACH DELETE n } "
    "WITH e, iri, owned CALL (e) { WITH e WHERE e.label IS NULL AND e.embedding IS NULL AND NOT (e)--() DELETE e } "
    "RETURN iri, owned"
)


def write_rows(tenant: Tenant, records: Sequence[DocumentRecord]) -> dict[str, list[dict[str, Any]]]:
    """The UNWIND rows of documents, entities, relations, chunks (each with its links: mentions,
    relation sources, subject) and names; every node and link once."""
    docs, chunks, batch = [], {}, _Batch()
    for r in records:
        d, dkey = r.document, node_key(tenant, r.document.id)
        words = [terms(f"{d.title}\n{c.text}" if d.title else c.text) for c in r.chunks]  # as the embedded index
        lex, lexlen = [" ".join(w) for w in words], [len(w) for w in words]
        ckeys = [node_key(tenant, c.id) for c in r.chunks]
        props = {"id": d.id, "title": d.title, "timestamp": d.timestamp.timestamp() if d.timestamp else None,
                 "metadata": json.dumps(d.metadata), "meta": meta_pairs(d.metadata), "content_hash": r.content_hash,
                 "chunks": len(r.chunks), "lexlen": sum(lexlen), "title_entity": r.title_entity,
                 "spellings": doc_spellings(r)}  # fmt: skip
        docs.append({"key": dkey, "chunk_keys": ckeys, "props": props})
        subject = [entity_key(tenant, r.title_entity)] if r.title_entity else []
        for c, v, ck, x, n in zip(r.chunks, r.vectors, ckeys, lex, lexlen, strict=True):
            cprops = {"n": chunk_number(ck), "id": c.id, "document_id": d.id, "ordinal": c.ordinal, "text": c.text,
                      "start": c.start, "end": c.end, "tokens": c.tokens, "lexical": x, "lexlen": n, "page": c.page,
                      "section": c.section}  # fmt: skip
            row = chunks.setdefault(ck, {"mentions": {}, "ends": {}, "subjects": {}})
            row.update(key=ck, dkey=dkey, props=cprops, vec=stored_vector(v))
            row["subjects"].update(dict.fromkeys(subject))
        batch.add(tenant, r, chunks)
    entities, relations, names = batch.rows()
    at = {e["ekey"]: i for i, e in enumerate(entities)}
    rows = [{**c, "mentions": [(at[k], n) for k, n in c["mentions"].items()], "ends": list(c["ends"]),
             "subjects": list(c["subjects"])}
            for c in chunks.values()]  # fmt: skip
    names = [{**n, "entity": at[n["ekey"]]} for n in names]
    return {"docs": docs, "chunks": rows, "entities": entities, "relations": relations, "names": names}


class _Batch:
    """A batch's entities, relations and names, each once, and its chunks' links (into their rows)."""

    def __init__(self) -> None:
        self.entities: dict[str, dict[str, Any]] = {}
        self.relations: dict[tuple[str, str, str], dict[str, Any]] = {}  # by (subject key, p, object key)
        self.names: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, tenant: Tenant, r: DocumentRecord, chunks: dict[str, dict[str, Any]]) -> None:
        """`r`'s mentions, relation sources and names (links of chunks not in `r` are left out)."""
        own = {node_key(tenant, c.id) for c in r.chunks}
        mentioned: dict[str, str] = {}  # IRI -> entity key, in mention order
        for m in r.mentions:
            ck, ek = node_key(tenant, m.chunk_id), entity_key(tenant, m.entity)
            if ck not in own:
                continue
            mentioned.setdefault(m.entity, ek)
            links = chunks[ck]["mentions"]
            links[ek] = links.get(ek, 0) + m.count
            e = self.entities.setdefault(ek, {"ekey": ek, "iri": m.entity, "owned": m.entity in r.owned,
                                              "concept_key": None})  # fmt: skip
            if e["concept_key"] is None:  # the first the mentions give
                e["concept_key"] = r.keys.get(m.entity)
        for x in r.relations:
            sk, ok = entity_key(tenant, x.s), entity_key(tenant, x.o)
            row = {"sk": sk, "ok": ok, "s": x.s, "p": x.p, "o": x.o, "src": {}}
            rel = self.relations.setdefault((sk, x.p, ok), row)
            for c in x.chunk_ids:
                if (ck := node_key(tenant, c)) in own:
                    rel["src"][chunk_number(ck)] = None
                    unmentioned = [k for k in (sk, ok) if k not in chunks[ck]["mentions"]]
                    chunks[ck]["ends"].update(dict.fromkeys(unmentioned))
        for e, ek in mentioned.items():
            for k in dict.fromkeys((r.keys.get(e, ""), *r.aliases.get(e, ()))):
                if k:
                    nk = name_key(tenant, k)
                    self.names.setdefault((nk, ek), {"nkey": nk, "name": k, "ekey": ek})

    def rows(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
        """Entities, relations and names in key order: concurrent writers lock them in one order."""
        relations = [{**self.relations[k], "src": list(self.relations[k]["src"])} for k in sorted(self.relations)]
        return [self.entities[k] for k in sorted(self.entities)], relations, [self.names[k] for k in sorted(self.names)]


def chunk_number(ckey: str) -> int:
    """A chunk's number: 63 bits of its key's digest (the key names its tenant)."""
    return int.from_bytes(hashlib.blake2b(ckey.encode(), digest_size=8).digest(), "big") >> 1


def name_key(tenant: Tenant, key: str) -> str:
    """The node key of one concept key (a name) of a tenant."""
    return node_key(tenant, "name", key)


async def linked(run: Runner, params: dict[str, Any]) -> tuple[list[Triple], dict[str, str]]:
    """Relations and entities (key -> IRI) the documents of `dkeys` link now; takes their chunks'
    numbers off those relations' sources (the chunks are replaced or deleted in this transaction)."""
    rows = await run(OLD_LINKS, params)
    rels = sorted({(s, p, o) for r in rows for s, p, o in r["rels"]})
    return rels, {k: iri for r in rows for k, iri in r["ents"]}


async def unlinked(
    run: Runner, tenant: Tenant, params: dict[str, Any], old: tuple[list[Triple], dict[str, str]]
) -> RemovedLinks:
    """Of what the removed versions linked: unsupported relations, unmentioned owned concepts."""
    triples, entities = old
    rels = await run(UNSUPPORTED, {**params, "rels": relation_rows(tenant, triples)}) if triples else []
    ents = await run(UNMENTIONED, {**params, "ekeys": sorted(entities)}) if entities else []
    return RemovedLinks(
        relations=sorted((r["s"], r["p"], r["o"]) for r in rels),
        concepts=sorted(r["iri"] for r in ents if r["owned"]),
        touched=sorted(entities.values()),
    )
