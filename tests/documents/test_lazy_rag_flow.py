"""lazy-rag's scenario (tests/documents/lazy_rag_scenario.py) over the memory bus on the embedded
default (SQLite, local vectors, the real embedding model)."""

from __future__ import annotations

from pathlib import Path

from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings
from tests.documents.lazy_rag_scenario import check_lazy_rag


async def test_lazy_rag_keeps_its_promises_over_the_memory_bus(tmp_path: Path) -> None:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings(request_timeout_s=300)) as system:
        await check_lazy_rag(system, "alice")
