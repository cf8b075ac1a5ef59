"""The Cypher the Neo4j triple store and entity index run (the store: neo4j_store.py). Every
value is a parameter: no query text is built from a request."""

from __future__ import annotations

# A collection's load state (`n += $state`: a null field removes the property).
SET_LOAD = "MERGE (n:KgLoad {key: $key}) SET n.user = $user, n.collection = $collection, n += $state"
# All properties: naming one no node has yet (`error`) makes the server warn on every read.
GET_LOAD = "MATCH (n:KgLoad {key: $key}) RETURN properties(n) AS state"
DELETE_LOAD = "MATCH (n:KgLoad {key: $key}) DELETE n"


_ROW = "coalesce(o.uri, o.value) AS o, o:KgLiteral AS lit, o.datatype AS dt, o.language AS lang"
SCOPE_EDGE = " r.user = $user AND r.collection = $collection"

# The rows' entities MERGEd once each (`nodes`: in key order, so concurrent writers lock them in one
# order), then each edge between the two it names by position: no index seek a row for its ends.
ADD_IRI_EDGES = (
    "CALL () { UNWIND range(0, size($nodes) - 1) AS i WITH i, $nodes[i] AS row "
    "MERGE (n:KgEntity {key: row.key}) ON CREATE SET n.user = $user, n.collection = $collection, n.uri = row.iri "
    "WITH i, n ORDER BY i RETURN collect(n) AS nodes } "
    "UNWIND $rows AS row WITH row, nodes[row.s] AS s, nodes[row.o] AS o "
    "MERGE (s)-[r:KG_EDGE {p: row.p}]->(o) ON CREATE SET r.user = $user, r.collection = $collection"
)
ADD_LITERAL_EDGES = (
    "UNWIND $rows AS row "
    "MERGE (s:KgEntity {key: row.sk}) ON CREATE SET s.user = $user, s.collection = $collection, s.uri = row.s "
    "MERGE (o:KgLiteral {key: row.ok}) ON CREATE SET o.user = $user, o.collection = $collection, "
    "o.value = row.o, o.datatype = row.dt, o.language = row.lang "
    "MERGE (s)-[r:KG_EDGE {p: row.p}]->(o) ON CREATE SET r.user = $user, r.collection = $collection"
)
SET_LABELS = "UNWIND $rows AS row MATCH (s:KgEntity {key: row.sk}) SET s.label = row.label"
# Label triples that replace an IRI's label (`replace_labels`): a node whose label is already the
# row's is left unlocked (popular concepts stay free); the SET of `label_lock` takes the write lock
# of any other before its label edges are read, so concurrent writers replace one after another
# and each deletes the label edge the one before it wrote.
REPLACE_LABELS = (
    "UNWIND $rows AS row "
    "MERGE (s:KgEntity {key: row.sk}) ON CREATE SET s.user = $user, s.collection = $collection, s.uri = row.s "
    "WITH s, row WHERE s.label IS NULL OR s.label <> row.o "
    "SET s.label_lock = true "
    "WITH s, row CALL (s, row) { MATCH (s)-[old:KG_EDGE {p: row.p}]->(l:KgLiteral) WHERE l.value <> row.o "
    "DELETE old } "
    "MERGE (o:KgLiteral {key: row.ok}) ON CREATE SET o.user = $user, o.collection = $collection, "
    "o.value = row.o, o.datatype = row.dt, o.language = row.lang "
    "MERGE (s)-[r:KG_EDGE {p: row.p}]->(o) ON CREATE SET r.user = $user, r.collection = $collection "
    "SET s.label = row.o"
)
UNLOCK_LABELS = (
    "UNWIND $rows AS row MATCH (s:KgEntity {key: row.sk}) WHERE s.label_lock IS NOT NULL REMOVE s.label_lock"
)

PATTERN_MATCH = {
    "s": "MATCH (s:KgEntity {key: $sk})-[r:KG_EDGE]->(o) WHERE",
    "o_iri": "MATCH (s:KgEntity)-[r:KG_EDGE]->(o:KgEntity {key: $ok}) WHERE",
    "o_lit": "MATCH (s:KgEntity)-[r:KG_EDGE]->(o:KgLiteral {key: $ok}) WHERE",
    "p": "MATCH (s:KgEntity)-[r:KG_EDGE]->(o) WHERE",
    "all": "MATCH (s:KgEntity {user: $user, collection: $collection})-[r:KG_EDGE]->(o) WHERE",
}
_EDGE_COLUMNS = ("s", "p", "o", "lit", "dt", "lang")


def _collect_maps(*columns: str) -> str:
    """The aggregation of rows into a list of maps of `columns`."""
    return "collect({" + ", ".join(c + ": " + c for c in columns) + "})"


def _collected(cypher: str, *columns: str) -> str:
    """`cypher`'s rows returned as ONE record: `rows`, a list of maps of `columns`, in order.

    The async driver takes a message per record, ~0.15 ms of CPU each (100 rows: 16 ms on
    localhost); 1,000 rows as one record of maps cost 4 ms. Read with `Neo4jConnection.read_rows`.
    """
    return "CALL () { " + cypher + " } RETURN " + _collect_maps(*columns) + " AS rows"


def _pattern(head: str, by_p: bool, by_o: bool) -> str:
    """A pattern query: the MATCH of the most selective bound term, the tenant's edges, filtered
    by predicate ($p) and object key ($ok) when bound."""
    where = SCOPE_EDGE + (" AND r.p = $p" if by_p else "") + (" AND o.key = $ok" if by_o else "")
    match = PATTERN_MATCH[head] + where
    return _collected(match + " RETURN s.uri AS s, r.p AS p, " + _ROW + " LIMIT $limit", *_EDGE_COLUMNS)


# by (head of PATTERN_MATCH, predicate bound, object bound)
PATTERN = {
    (h, by_p, by_o): _pattern(h, by_p, by_o) for h in PATTERN_MATCH for by_p in (False, True) for by_o in (False, True)
}


# Neo4j's similarity is (1 + cos) / 2, null for a zero vector (cosine 0, as in edge_scoring.cosines).
def _cos(node: str) -> str:
    """The question's ($vec) cosine to `node`'s vector, computed by the server so vectors never
    cross the wire (decoding 500 x 384 floats took ~280 ms)."""
    return "2 * coalesce(vector.similarity.cosine(" + node + ".embedding, $vec), 0.5) - 1"


def _far_sim(node: str, scored: bool) -> str:
    """The `sim` column of an edge row: the far end's cosine (null for a literal or without $vec)."""
    if not scored:
        return ", null AS sim"
    return ", CASE WHEN " + node + ".embedding IS NULL THEN null ELSE " + _cos(node) + " END AS sim"


def _neighbours(direction: str, focus: bool, scored: bool) -> str:
    """The frontier's edges in one query: per entity (row `i` of $keys) its first $lim edges each
    way in key order (predicate, then far end: the order every backend reads them in), and where
    that read can have stopped at its limit (degrees are O(1) in Neo4j), its first $flim edges of
    each $focus predicate. Scored: each row has its far end's cosine to $vec, and the tenant's
    predicate nodes of the rows and of $rels come along with their vectors and cosines (one round
    trip instead of a second query for them)."""
    out_row = "n.uri AS s, r.p AS p, " + _ROW + _far_sim("o", scored) + " ORDER BY p, o, lit, dt, lang"
    in_row = "s.uri AS s, r.p AS p, n.uri AS o, false AS lit, '' AS dt, '' AS lang" + _far_sim("s", scored)
    in_row += " ORDER BY p, s"
    parts = {
        "out": "MATCH (n)-[r:KG_EDGE]->(o) WHERE r.p <> $label RETURN 0 AS dir, " + out_row + " LIMIT $lim",
        "in": "MATCH (s:KgEntity)-[r:KG_EDGE]->(n) WHERE r.p <> $label RETURN 1 AS dir, " + in_row + " LIMIT $lim",
    }
    focus_parts = {
        "out": "UNWIND CASE WHEN COUNT { (n)-[:KG_EDGE]->() } >= $lim THEN $focus ELSE [] END AS fp "
        "CALL (n, fp) { MATCH (n)-[r:KG_EDGE]->(o) WHERE r.p = fp RETURN 2 AS dir, " + out_row,
        "in": "UNWIND CASE WHEN COUNT { (n)<-[:KG_EDGE]-() } >= $lim THEN $focus ELSE [] END AS fp "
        "CALL (n, fp) { MATCH (s:KgEntity)-[r:KG_EDGE]->(n) WHERE r.p = fp RETURN 3 AS dir, " + in_row,
    }
    ways = ["out", "in"] if direction == "both" else [direction]
    unions = [parts[w] for w in ways]
    if focus:
        unions += [focus_parts[w] + " LIMIT $flim } RETURN dir, s, p, o, lit, dt, lang, sim" for w in ways]
    query = (
        "UNWIND range(0, size($keys) - 1) AS i WITH i, $keys[i] AS k "
        "MATCH (n:KgEntity {key: k}) WHERE n.user = $user AND n.collection = $collection CALL (n) { "
        + " UNION ALL ".join(unions)
        + " } RETURN i, dir, s, p, o, lit, dt, lang, sim"
    )
    columns = ("i", "dir", *_EDGE_COLUMNS, "sim")
    if not scored:
        return _collected(query, *columns)
    return (
        "CALL () { " + query + " } WITH " + _collect_maps(*columns) + " AS rows "
        "OPTIONAL MATCH (pn:KgPredicate {user: $user, collection: $collection}) "
        "WHERE pn.uri IN [x IN rows | x.p] + $rels "
        "RETURN rows, [m IN collect(pn) | {iri: m.uri, vec: m.embedding, sim: " + _cos("m") + "}] AS predicates"
    )


NEIGHBOURS = {
    (d, focus, scored): _neighbours(d, focus, scored)
    for d in ("out", "in", "both")
    for focus in (False, True)
    for scored in (False, True)
}
LABELS = _collected(
    "UNWIND $keys AS k MATCH (n:KgEntity {key: k}) "
    "WHERE n.user = $user AND n.collection = $collection AND n.label IS NOT NULL RETURN n.uri AS iri, n.label AS label",
    "iri",
    "label",
)
REMOVE_EDGES = (
    "UNWIND $rows AS row MATCH (s:KgEntity {key: row.sk})-[r:KG_EDGE {p: row.p}]->(o {key: row.ok}) "
    "WHERE r.user = $user AND r.collection = $collection DELETE r"
)
REMOVE_LABELS = "UNWIND $rows AS row MATCH (s:KgEntity {key: row.sk}) WHERE s.label = row.label REMOVE s.label"
# After a removal, the ends left holding nothing (no edge, label, vector or claim): a bare node would
# still make its collection listed, after a delete that raced a write had removed every triple.
PRUNE_ENTITIES = (
    "UNWIND $keys AS k MATCH (n:KgEntity {key: k}) WHERE n.user = $user AND n.collection = $collection "
    "AND n.label IS NULL AND n.embedding IS NULL AND n.index_label IS NULL AND n.concept IS NULL "
    "AND n.label_lock IS NULL AND NOT (n)--() DELETE n"
)
PRUNE_LITERALS = (
    "UNWIND $keys AS k MATCH (n:KgLiteral {key: k}) WHERE n.user = $user AND n.collection = $collection "
    "AND NOT (n)--() DELETE n"
)
COLLECTIONS = (
    "MATCH (n:KgEntity) WHERE n.user = $user WITH DISTINCT n.collection AS c "
    "RETURN c AS collection, COUNT { MATCH (:KgEntity {user: $user, collection: c})-[:KG_EDGE]->() } AS n"
)
_BATCHED = " } IN TRANSACTIONS OF 5000 ROWS"
DELETE_TRIPLES = (
    "MATCH (:KgEntity {user: $user, collection: $collection})-[r:KG_EDGE]->() CALL (r) { DELETE r" + _BATCHED,
    "MATCH (n:KgLiteral {user: $user, collection: $collection}) CALL (n) { DETACH DELETE n" + _BATCHED,
    "MATCH (n:KgEntity {user: $user, collection: $collection}) CALL (n) { REMOVE n.label "
    "WITH n WHERE n.embedding IS NULL DETACH DELETE n" + _BATCHED,
)

# A label vector is set by db.create.setNodeVectorProperty: float32 (384 × 4 bytes), where SET of a
# Bolt list stores float64 (384 × 8). A zero vector (row.vec null) removes the one stored before.
_SET_VECTOR = (
    "n.embedding = CASE WHEN row.vec IS NULL THEN null ELSE n.embedding END "
    "WITH n, row WHERE row.vec IS NOT NULL CALL db.create.setNodeVectorProperty(n, 'embedding', row.vec)"
)
UPSERT = {
    "entity": "UNWIND $rows AS row MERGE (n:KgEntity {key: row.key}) "
    "ON CREATE SET n.user = $user, n.collection = $collection, n.uri = row.iri "
    "SET n.index_label = row.label, n.search_text = row.text, " + _SET_VECTOR,
    "predicate": "UNWIND $rows AS row MERGE (n:KgPredicate {key: row.key}) "
    "ON CREATE SET n.user = $user, n.collection = $collection, n.uri = row.iri "
    "SET n.label = row.label, " + _SET_VECTOR,
}
_COS = _cos("n")
ANN = (
    "CALL db.index.vector.queryNodes('kg_entity_embedding', $k, $vec) YIELD node AS n "
    "WITH count(*) AS total, collect(CASE WHEN n.user = $user AND n.collection = $collection "
    "THEN {iri: n.uri, label: n.index_label, sim: " + _COS + "} END) AS hits RETURN total, hits[0..$limit] AS hits"
)  # the index yields nodes best first: only the best `limit` of the tenant's cross the wire

# An entity search's two index reads in one statement: the full-text candidates of $q (none when
# $q is null), checked by the caller against the text, and the first ANN read of $vec (none when null).
SEARCH = (
    "CALL () { WITH 1 AS one WHERE $q IS NOT NULL "
    "CALL db.index.fulltext.queryNodes('kg_entity_text', $q) YIELD node "
    "WHERE node.user = $user AND node.collection = $collection "
    "RETURN node.uri AS iri, node.index_label AS label LIMIT $text_limit } "
    "WITH collect({iri: iri, label: label}) AS texts "
    "CALL () { WITH 1 AS one WHERE $vec IS NOT NULL " + ANN + " } RETURN texts, total, hits"
)

# exact nearest nodes of one kind in the tenant: MATCH (n:Kind {scope}) + this + the label column
_NEAREST = (
    " WHERE n.embedding IS NOT NULL WITH n, " + _COS + " AS sim ORDER BY sim DESC, n.uri LIMIT $limit "
    "RETURN n.uri AS iri, sim, "
)
_HIT = ("iri", "sim", "label")
EXACT = _collected(
    "MATCH (n:KgEntity {user: $user, collection: $collection})" + _NEAREST + "n.index_label AS label", *_HIT
)
NEAREST_PREDICATES = _collected(
    "MATCH (n:KgPredicate {user: $user, collection: $collection})" + _NEAREST + "n.label AS label", *_HIT
)
NAMED = _collected(
    "UNWIND $names AS name MATCH (n:KgEntity {search_text: name}) WHERE n.user = $user "
    "AND n.collection = $collection AND n.embedding IS NOT NULL RETURN name, min(n.uri) AS iri",
    "name",
    "iri",
)
DELETE_ENTITIES = (
    "UNWIND $keys AS k MATCH (n:KgEntity {key: k}) WHERE n.user = $user AND n.collection = $collection "
    "REMOVE n.embedding, n.index_label, n.search_text WITH n WHERE n.label IS NULL AND NOT (n)--() DELETE n"
)
DELETE_PREDICATES = (
    "UNWIND $keys AS k MATCH (n:KgPredicate {key: k}) WHERE n.user = $user AND n.collection = $collection DELETE n"
)
# The collection's model record goes with its last vector: nothing is left that a write of another
# model would mix with (a write that raced the collection's delete, taken back, leaves none).
FORGET_VECTOR_MODEL = (
    "MATCH (m:KgVectorModel {key: $mkey}) "
    "WHERE NOT EXISTS { MATCH (n:KgEntity {user: $user, collection: $collection}) WHERE n.embedding IS NOT NULL } "
    "AND NOT EXISTS { MATCH (:KgPredicate {user: $user, collection: $collection}) } DELETE m"
)
INDEX_COLLECTIONS = (
    "MATCH (n:KgEntity) WHERE n.user = $user AND n.embedding IS NOT NULL "
    "RETURN n.collection AS collection, count(*) AS n"
)
# the tenant's entity (with a vector) and predicate nodes of $keys; + what each returns
_ENTITIES_BY_KEY = (
    "UNWIND $keys AS k MATCH (n:KgEntity {key: k}) WHERE n.user = $user AND n.collection = $collection "
    "AND n.embedding IS NOT NULL RETURN n.uri AS iri, "
)
_PREDICATES_BY_KEY = (
    "UNWIND $keys AS k MATCH (n:KgPredicate {key: k}) WHERE n.user = $user AND n.collection = $collection "
    "RETURN n.uri AS iri, "
)
SIMILARITIES = _collected(
    _ENTITIES_BY_KEY + _COS + " AS sim UNION ALL " + _PREDICATES_BY_KEY + _COS + " AS sim", "iri", "sim"
)
VECTORS = _collected(
    _ENTITIES_BY_KEY + "n.embedding AS vec UNION ALL " + _PREDICATES_BY_KEY + "n.embedding AS vec", "iri", "vec"
)
# the model of a collection's vectors: recorded by its first write, in the write's transaction
CLAIM_VECTOR_MODEL = (
    "MERGE (m:KgVectorModel {key: $key}) ON CREATE SET m.user = $user, m.collection = $collection, "
    "m.model = $model, m.dimensions = $dimensions RETURN m.model AS model, m.dimensions AS dimensions"
)
GET_VECTOR_MODEL = "MATCH (m:KgVectorModel {key: $key}) RETURN m.model AS model, m.dimensions AS dimensions"
DELETE_INDEX = (
    "MATCH (m:KgVectorModel {user: $user, collection: $collection}) CALL (m) { DELETE m" + _BATCHED,
    "MATCH (n:KgPredicate {user: $user, collection: $collection}) CALL (n) { DETACH DELETE n" + _BATCHED,
    "MATCH (n:KgEntity {user: $user, collection: $collection}) CALL (n) { "
    "REMOVE n.embedding, n.index_label, n.search_text "
    "WITH n WHERE n.label IS NULL AND NOT (n)--() DELETE n" + _BATCHED,
)
