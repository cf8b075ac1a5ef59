"""reranker: graph-aware reranking (semantic, episode-mentions, node-distance, hybrid; spec 001)."""
