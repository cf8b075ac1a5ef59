"""The scope property of every retrieval service on the embedded default (SQLite, local vectors)."""

from __future__ import annotations

from pathlib import Path

from processors.base.settings import RuntimeSettings
from processors.commands.system import embedded
from processors.stores.settings import StoreSettings
from tests.documents.scope_property import QUESTIONS, check_scopes, scopes_count


async def test_no_service_leaks_a_scope_or_loses_what_it_holds(tmp_path: Path) -> None:
    async with embedded(StoreSettings(home=tmp_path / "home"), RuntimeSettings(request_timeout_s=300)) as system:
        assert await check_scopes(system, "prop") == scopes_count() * len(QUESTIONS)
