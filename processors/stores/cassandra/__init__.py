"""The Cassandra backend: triples and entity vectors."""
