"""Errors a handler raises to answer with a typed error response.

Only these are the client's errors: any other exception in a handler (a `ValueError` or a
pydantic `ValidationError` included) is an internal fault, logged and retried by the framework.
Raise `BadRequest` where input is judged; `invalid` turns a validation of the client's input
into one."""

from __future__ import annotations

from pydantic import ValidationError


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


def invalid(e: ValidationError, what: str = "request") -> BadRequest:
    """The client's input `what` failed validation `e`: a bad request naming its first fields."""
    fields = "; ".join(f"{'.'.join(map(str, x['loc'])) or '<root>'}: {x['msg']}" for x in e.errors()[:5])
    return BadRequest(f"invalid {what}: {fields}")


class QueryTimeout(ServiceError):
    """The request ran past its time budget; partial work was discarded."""

    def __init__(self, message: str) -> None:
        super().__init__("timeout", message)
