"""Communities of the concept graph: hierarchical Leiden, profiles, lazy summaries."""
