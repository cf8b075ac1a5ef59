"""The tenant a request reads or writes: user + collection, and optionally a narrower scope.

Every store query carries a tenant (inside the query, never filtered afterwards), so this is the
one type that names it across the house: request models build it (`ScopedRequest.tenant`), store
protocols take it, and both backends turn it into their query parameters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from schemas.scope import Scope


@dataclass(frozen=True)
class Tenant:
    """User + collection (every store call carries them), and the request's narrower scope."""

    user: str
    collection: str
    scope: Scope | None = None

    def scoped(self, scope: Scope | None) -> Tenant:
        """This tenant narrowed to `scope` (None: the whole collection)."""
        return replace(self, scope=scope)

    @property
    def unscoped(self) -> Tenant:
        """The whole collection of this tenant (writes and collection-wide reads)."""
        return self if self.scope is None else replace(self, scope=None)
