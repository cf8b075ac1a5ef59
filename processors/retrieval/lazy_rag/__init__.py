"""lazy-rag: graph-aware retrieval over documents and a query-time summary (spec 000)."""
