"""Implementations of the `kgflow` subcommands."""
