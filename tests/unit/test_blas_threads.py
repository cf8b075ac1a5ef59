"""A processor process runs numpy on one BLAS thread, whatever it imported first: a second
OpenBLAS thread spins while idle and took most of a core in a deployed graph-embeddings."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A fresh interpreter: numpy not loaded when the limit is set (a System sets it as it is made, by
# when the processor catalog it builds from has loaded numpy: the second probe).
PROBE = """
import json, sys
from processors.base.runtime import limit_blas_threads
from processors.base.settings import RuntimeSettings
before = "numpy" in sys.modules
limit_blas_threads(RuntimeSettings().blas_threads)
import threadpoolctl
threads = [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
print(json.dumps({"numpy_before": before, "threads": threads}))
"""


def test_a_limit_set_before_numpy_is_imported_still_holds(tmp_path: Path) -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}  # two unless kgflow limits them
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["numpy_before"] is False  # the case that went wrong: the limit came before numpy
    assert seen["threads"] and all(n == 1 for n in seen["threads"]), seen


SYSTEM_PROBE = """
import json, sys
from processors.base.bus import MemoryBus
from processors.base.settings import RuntimeSettings
from processors.commands.system import System
from processors.stores.settings import StoreSettings
System(MemoryBus(), StoreSettings(home=sys.argv[1]), RuntimeSettings())
import threadpoolctl
print(json.dumps([i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]))
"""


def test_a_system_runs_numpy_on_one_blas_thread(tmp_path: Path) -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    done = subprocess.run(
        [sys.executable, "-c", SYSTEM_PROBE, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    threads = json.loads(done.stdout.strip().splitlines()[-1])
    assert threads and all(n == 1 for n in threads), threads
