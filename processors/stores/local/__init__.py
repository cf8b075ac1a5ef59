"""The local vector backend: the entity index persisted beside the SQLite file, and in-memory
search indexes."""
