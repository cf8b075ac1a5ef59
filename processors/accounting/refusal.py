"""The one error a store raises for the client's own request (kept free of imports, so the
framework can know it without loading the stores)."""

from __future__ import annotations


class StoreRefusal(ValueError):
    """A write the store refuses because of what was asked (not a fault of the store): the
    framework answers it as the client's bad request and does not retry it."""
