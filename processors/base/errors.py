"""Errors a handler raises to answer with a typed error response."""

from __future__ import annotations


class ServiceError(ValueError):
    """A request that cannot be served; becomes `error: {type, message}` on the wire.

    Retrying elsewhere would not help, so the request is acknowledged.
    """

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(message)
        self.type = type_
        self.message = message


class BadRequest(ServiceError):
    """The request is malformed or names something that does not exist."""

    def __init__(self, message: str) -> None:
        super().__init__("bad-request", message)


class QueryTimeout(ServiceError):
    """The request ran past its time budget; partial work was discarded."""

    def __init__(self, message: str) -> None:
        super().__init__("timeout", message)
