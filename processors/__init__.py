"""kgflow processors and the framework they share."""
