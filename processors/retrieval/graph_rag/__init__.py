"""GraphRAG: seed entities, relevance-guided batched traversal, batched labels, answer."""
