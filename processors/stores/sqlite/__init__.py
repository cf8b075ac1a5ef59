"""The embedded backend on SQLite: triples (+ labels, adjacency), documents and communities."""
