"""Triples query service: patterns, batched neighbours, batched labels."""
