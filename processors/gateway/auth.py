"""Gateway authentication: bearer tokens, optionally bound to one workspace (= kgflow user).

Tokens come from `KGFLOW_GATEWAY_TOKEN` (one admin token, any workspace) and/or a token file
(`KGFLOW_GATEWAY_TOKEN_FILE`), one token per line: `TOKEN` (admin) or `TOKEN WORKSPACE`
(bound: that token can only act as WORKSPACE). `#` starts a comment. With no token configured
the gateway is open and must listen on loopback only.
"""

from __future__ import annotations

import hmac
import os
from dataclasses import dataclass
from pathlib import Path

from processors.gateway.translate import DEFAULT_WORKSPACE


class AuthError(PermissionError):
    """Authentication or authorisation failed."""

    def __init__(self, message: str, type_: str = "unauthorized") -> None:
        super().__init__(message)
        self.type = type_
        self.message = message


@dataclass(frozen=True)
class Principal:
    """Who is calling: `workspace` is None for an admin (or open gateway), else the bound workspace."""

    workspace: str | None = None
    admin: bool = True

    @property
    def default_workspace(self) -> str:
        """The workspace used when a request names none."""
        return self.workspace or DEFAULT_WORKSPACE

    def resolve(self, requested: object) -> str:
        """The workspace a request may act as; a bound token may never use another's."""
        if requested is None or requested == "":
            return self.default_workspace
        if not isinstance(requested, str) or not 1 <= len(requested) <= 256:
            raise AuthError("workspace: expected a name of 1-256 characters", "bad-request")
        if self.workspace is not None and requested != self.workspace:
            raise AuthError(f"this token may not act in workspace {requested!r}", "forbidden")
        return requested


OPEN = Principal()


class Authenticator:
    """Checks tokens in constant time against the configured secrets."""

    def __init__(self, tokens: dict[str, str | None]) -> None:
        self._tokens = dict(tokens)

    @classmethod
    def from_env(cls, token: str | None = None, token_file: str | None = None) -> Authenticator:
        """Tokens from arguments, else KGFLOW_GATEWAY_TOKEN / KGFLOW_GATEWAY_TOKEN_FILE."""
        token = token if token is not None else os.environ.get("KGFLOW_GATEWAY_TOKEN")
        token_file = token_file if token_file is not None else os.environ.get("KGFLOW_GATEWAY_TOKEN_FILE")
        tokens: dict[str, str | None] = {}
        if token and not token.strip():  # a token nobody can send must not count as configured
            raise ValueError("KGFLOW_GATEWAY_TOKEN is blank: set a token, or unset it for an open gateway on loopback")
        if token:
            tokens[token.strip()] = None
        if token_file:
            for n, line in enumerate(Path(token_file).read_text(encoding="utf-8").splitlines(), 1):
                line = line.split("#", 1)[0].strip()
                if not line:
                    continue
                parts = line.split()
                if len(parts) > 2:
                    raise ValueError(f"{token_file}:{n}: expected `TOKEN [WORKSPACE]`")
                tokens[parts[0]] = parts[1] if len(parts) == 2 else None
        return cls(tokens)

    @property
    def enabled(self) -> bool:
        """True when at least one token is configured."""
        return bool(self._tokens)

    def check(self, token: object) -> Principal:
        """The principal of `token`; raises AuthError when tokens are required and it is not one
        (anything but a string, e.g. a number or a list from a JSON frame, is not a token)."""
        if not self.enabled:
            return OPEN
        if not token:
            raise AuthError("a token is required")
        if not isinstance(token, str):
            raise AuthError("invalid token: expected a string")
        given = token.encode("utf-8", "surrogatepass")  # lone surrogates (a non-UTF-8 header) compare too
        found: Principal | None = None
        for secret, workspace in self._tokens.items():  # compare against every token: constant time
            if hmac.compare_digest(secret.encode(), given):
                found = Principal(workspace, workspace is None)
        if found is None:
            raise AuthError("invalid token")
        return found

    def check_header(self, header: str | None, query_token: str | None = None) -> Principal:
        """Authenticate an HTTP request by `Authorization: Bearer` (or, where a client can send no
        header, a `token` query parameter)."""
        token = query_token
        if header:
            scheme, _, value = header.partition(" ")
            if scheme.lower() == "bearer":
                token = value.strip()
        return self.check(token)
