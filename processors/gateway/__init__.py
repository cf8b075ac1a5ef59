"""The gateway: TrustGraph-compatible websocket and REST API in front of the bus."""
