"""The documents flow: reading, chunking and indexing documents, and the document-load service."""
