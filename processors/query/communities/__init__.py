"""Reading communities (with lazily written, cached summaries): the communities service."""
