"""A `kgflow query` or `kgflow load` pays for its imports before it answers: the gateway (aiohttp,
the MCP SDK, the routes) took more than half of the CLI's import time and none of those commands
runs it. The gateway is imported only by the commands that serve it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter: what importing the CLI (and building the in-process system's catalog) loads.
PROBE = """
import json, sys
from processors.commands.cli import build_parser
from processors.commands.catalog import GATEWAY, PROCESSORS
build_parser()
heavy = sorted(m for m in sys.modules if m.startswith(("processors.gateway", "mcp", "aiohttp")))
print(json.dumps({"heavy": heavy, "gateway_listed": GATEWAY.name in PROCESSORS}))
"""


def test_the_cli_imports_no_gateway_until_one_is_served() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["heavy"] == [], seen["heavy"][:10]
    assert seen["gateway_listed"] is True  # `kgflow run gateway` still finds it


def test_the_gateway_entry_builds_the_gateway_processor(tmp_path: Path) -> None:
    from processors.base.bus import MemoryBus
    from processors.base.settings import RuntimeSettings
    from processors.commands.catalog import GATEWAY
    from processors.commands.system import System
    from processors.gateway.service import GatewayProcessor
    from processors.stores.settings import StoreSettings

    built = GATEWAY.build(System(MemoryBus(), StoreSettings(home=tmp_path), RuntimeSettings()))
    assert isinstance(built, GatewayProcessor)
    assert built.name == GATEWAY.name
