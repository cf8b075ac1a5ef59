"""One handler for a service whose requests are a union told apart by `operation`: a table from
request type to handler, so adding an operation is one row, not another isinstance branch."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel

from processors.base.processor import FlowContext
from schemas.base import Response

OperationHandler = Callable[[Any, FlowContext], Awaitable[Any]]


def by_operation(table: Mapping[type, OperationHandler]) -> OperationHandler:
    """A handler that runs `table[type(request)]` (every type the service's request union holds
    must have a row: `test_layout` checks each registered processor)."""

    def handle(req: BaseModel, flow: FlowContext[Any]) -> Awaitable[Response]:
        return table[type(req)](req, flow)

    handle.table = table  # type: ignore[attr-defined]  # for the registry test
    return handle
