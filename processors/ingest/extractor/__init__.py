"""Concept extraction from chunk text: named entities and noun phrases (spaCy), no model calls."""
