"""kgflow's services' own prompts as the TrustGraph config API shows them: type `prompt`, key
`template.<id>`, read-only. Each service keeps its prompt beside its algorithm; the wiring collects
them into one table (`processors.commands.catalog.PROMPTS`) that the gateway is handed."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel


class ServicePrompt(BaseModel, frozen=True):
    """A prompt a kgflow service asks its text-completion with: shown, never written."""

    id: str
    system: str  # the system instruction
    response_type: Literal["text", "json"]
    service: str  # the service that uses it (schemas.services)
    schema_: dict[str, Any] | None = None  # the JSON answer's schema (json prompts)

    def value(self) -> str:
        """The item's value as TrustGraph's prompt tools read it (`prompt`, `response-type`, `schema`)."""
        d: dict[str, Any] = {"id": self.id, "prompt": self.system, "response-type": self.response_type}
        if self.schema_ is not None:
            d["schema"] = self.schema_
        return json.dumps({**d, "read-only": True, "defined-in": self.service})


Prompts = Mapping[str, ServicePrompt]  # by id


def prompt_table(*prompts: ServicePrompt) -> dict[str, ServicePrompt]:
    """The prompts by id (two with one id is a wiring mistake, refused at import)."""
    table = {p.id: p for p in prompts}
    if len(table) != len(prompts):
        raise ValueError(f"prompt ids repeat: {sorted(p.id for p in prompts)}")
    return table
