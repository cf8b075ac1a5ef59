"""The Neo4j backend: triples, entity vectors (its vector index), documents and communities."""
