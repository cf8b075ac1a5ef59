"""Label resolver: batched rdfs:label lookup behind a shared TTL + LRU cache."""
