"""What a gateway client sees when its request fails: one `GatewayError` (type and message), whatever
failed underneath (the translation, the token, the called service, its time, or a bug of ours)."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from processors.base.client import RemoteError, RequestTimeout
from processors.gateway import translate as tr
from processors.gateway.auth import AuthError

log = logging.getLogger(__name__)


class GatewayError(Exception):
    """A failure the client sees as `{"error": {"type", "message"}}`."""

    def __init__(self, type_: str, message: str) -> None:
        super().__init__(f"{type_}: {message}")
        self.type = type_
        self.message = message

    def to_wire(self) -> dict[str, str]:
        """The error object of an error frame."""
        return {"type": self.type, "message": self.message}


@contextlib.contextmanager
def as_gateway_errors() -> Iterator[None]:
    """Every failure of a request as a GatewayError: a bug still ends in an error frame."""
    try:
        yield
    except GatewayError:
        raise
    except tr.NotSupported as e:
        raise GatewayError("not-supported", str(e)) from None
    except tr.BadRequest as e:
        raise GatewayError("bad-request", str(e)) from None
    except (AuthError, RemoteError) as e:
        raise GatewayError(e.type, e.message) from None
    except RequestTimeout as e:
        raise GatewayError("timeout", str(e)) from None
    except Exception as e:
        log.exception("gateway request failed")
        raise GatewayError("internal-error", f"{type(e).__name__}: {e}") from None
