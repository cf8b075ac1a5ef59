"""Writing triples: file readers, the resumable loader, and the triples-store service."""
