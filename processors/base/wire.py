"""The framework's two conversions at the wire: a request's bytes into its typed model (or a
`BadRequest`), and an exception into the typed error response the client receives."""

from __future__ import annotations

from pydantic import BaseModel, RootModel, ValidationError

from processors.accounting.refusal import StoreRefusal
from processors.base.client import RemoteError
from processors.base.errors import ServiceError, invalid
from schemas.base import Error, Response


def parse_request(model: type[BaseModel], data: bytes) -> BaseModel:
    """Validate raw JSON against a request model (a RootModel union gives the operation's model);
    a request that does not validate is a `BadRequest`."""
    try:
        obj = model.model_validate_json(data)
    except ValidationError as e:
        raise invalid(e) from None
    return obj.root if isinstance(obj, RootModel) else obj


def error_response(response: type[Response], exc: Exception) -> Response:
    """A response of type `response` carrying `exc` as a typed error: the client's (a
    `ServiceError`), a called service's, or else internal."""
    if isinstance(exc, ServiceError | RemoteError):  # a called service's type tells the client why
        err = Error(type=exc.type, message=exc.message)
    elif isinstance(exc, StoreRefusal):  # a store refused the client's write (another model's vectors)
        err = Error(type="bad-request", message=str(exc))
    else:
        err = Error(type="internal-error", message=f"{type(exc).__name__}: {exc}")
    return response(error=err, end_of_stream=True)
