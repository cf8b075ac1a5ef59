"""A processor process runs numpy on one BLAS thread, whatever it imported first: a second
OpenBLAS thread spins while idle and took most of a core in a deployed graph-embeddings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter, as `kgflow run` starts: numpy not loaded when the System is made.
PROBE = """
import json, sys
from processors.base.bus import MemoryBus
from processors.base.runtime import System
from processors.base.settings import RuntimeSettings
from processors.stores.settings import StoreSettings
before = "numpy" in sys.modules
System(MemoryBus(), StoreSettings(home=sys.argv[1]), RuntimeSettings())
import threadpoolctl
threads = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"numpy_before": before, "threads": threads}))
"""


def test_a_system_made_before_numpy_is_imported_still_limits_blas_threads(tmp_path: Path) -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}  # two unless kgflow limits them
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["numpy_before"] is False  # the case that went wrong: the limit came before numpy
    assert seen["threads"] and all(n == 1 for n in seen["threads"]), seen
