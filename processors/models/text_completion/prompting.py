"""What a service that prompts the flow's model needs, bus-free: the answer text-completion gave
(or the word that no model is configured), and retrieved text quoted as data so that it cannot
speak as the prompt."""

from __future__ import annotations

import re
from dataclasses import dataclass

from processors.models.text_completion.backend import Completion

_DATA_TAG = re.compile(r"<\s*(/?)\s*data\s*>", re.IGNORECASE)


def as_data(text: str) -> str:
    """Retrieved text made safe to quote between <data> and </data>: a document cannot close the
    data block (its own tags become [data] / [/data]) and so cannot speak as the prompt."""
    return _DATA_TAG.sub(lambda m: f"[{m.group(1)}data]", text)


@dataclass
class ModelAnswer(Completion):
    """A model's answer as text-completion gave it (`configured` False: no model is configured, the
    text says so)."""

    configured: bool = True
