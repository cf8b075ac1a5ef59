"""Documents: the store-facing service for documents, chunks, mentions and their lifecycle."""
