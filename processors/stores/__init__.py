"""Store backends behind one protocol: triples (+labels) and the entity index (vectors + label search)."""
