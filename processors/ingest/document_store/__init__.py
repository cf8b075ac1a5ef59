"""Writing documents: linking indexed documents into the graph, and the document-store service."""
