"""The services' prompts have one home: the catalog's table, which the gateway's config service is
handed and shows (read-only, named by the service that uses each), never a file path."""

from __future__ import annotations

import json

import pytest

from processors.commands.catalog import FLOW_PROCESSORS, PROMPTS
from processors.gateway import tg_config as tgc
from processors.gateway.translate import NotSupported
from schemas.prompts import ServicePrompt, prompt_table

ASK = ServicePrompt(id="ask", system="Answer briefly.", response_type="text", service="graph-rag")
PLAN = ServicePrompt(id="plan", system="Plan.", response_type="json", service="drift", schema_={"type": "object"})


def test_the_config_service_shows_the_prompts_it_is_handed() -> None:
    shown = tgc.workspace_items(prompt_table(ASK, PLAN), {}, "alice")["prompt"]
    assert sorted(shown) == ["system", "template.ask", "template.plan"]
    plan = json.loads(shown["template.plan"])
    assert plan == {"id": "plan", "prompt": "Plan.", "response-type": "json", "schema": {"type": "object"},
                    "read-only": True, "defined-in": "drift"}  # fmt: skip
    assert "template.ask" not in tgc.workspace_items({}, {}, "alice")["prompt"]


def test_a_handed_prompt_is_read_only_and_others_are_items() -> None:
    prompts = prompt_table(ASK)
    put = {"values": [{"type": "prompt", "key": "template.ask", "value": "{}"}]}
    with pytest.raises(NotSupported, match="graph-rag service"):
        tgc.write_items("put", put, prompts)
    same = {"values": [{"type": "prompt", "key": "template.ask", "value": ASK.value()}]}
    assert tgc.write_items("put", same, prompts) == []  # putting back what is shown changes nothing
    assert len(tgc.write_items("put", put, {})) == 1  # not a service's: an ordinary item


def test_a_repeated_prompt_id_is_refused() -> None:
    with pytest.raises(ValueError, match="repeat"):
        prompt_table(ASK, ASK.model_copy(update={"system": "other"}))


def test_every_prompt_belongs_to_a_running_service() -> None:
    served = {s.name for entry in FLOW_PROCESSORS for s in entry.serves}
    assert len(PROMPTS) == 9
    assert {p.service for p in PROMPTS.values()} <= served
    assert all(p.system.strip() for p in PROMPTS.values())
