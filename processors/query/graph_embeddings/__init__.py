"""Graph embeddings: entity search by vector plus lexical label matches."""
