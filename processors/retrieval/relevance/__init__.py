"""retrieval/relevance"""
