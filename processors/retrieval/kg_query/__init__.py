"""kg-query: LightRAG-style query modes with token budgets, scoped inside every store query (spec 002)."""
