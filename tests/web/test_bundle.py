"""The committed explorer bundle (processors/gateway/static/) is what web/ builds: the sources are
type-checked and bundled again into a temporary folder, and every file must match byte for byte.
Needs Node and npm (`make test` installs them with deploy/node.sh, and web/node_modules with `npm ci`);
without them the tests fail rather than skip: an unchecked bundle could be stale."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from processors.gateway.explorer import ASSETS, STATIC

ROOT = Path(__file__).resolve().parents[2]
WEB = ROOT / "web"

pytestmark = pytest.mark.timeout(600)


def _run(*cmd: str) -> None:
    done = subprocess.run(cmd, cwd=WEB, capture_output=True, text=True, timeout=540, check=False)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


@pytest.fixture(scope="module")
def node_modules() -> Path:
    """web/node_modules as the lockfile pins it (installed with `npm ci` when missing or stale)."""
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.fail("node and npm are needed to rebuild the explorer bundle: run `bash deploy/node.sh`")
    marker = WEB / "node_modules" / ".package-lock.json"
    lock = WEB / "package-lock.json"
    if not marker.exists() or marker.stat().st_mtime < lock.stat().st_mtime:
        _run("npm", "ci", "--no-audit", "--no-fund")
    return WEB / "node_modules"


def test_sources_type_check(node_modules: Path) -> None:
    _run(str(node_modules / ".bin" / "tsc"), "--noEmit", "-p", ".")


def test_committed_bundle_matches_its_sources(node_modules: Path, tmp_path: Path) -> None:
    _run("node", "build.mjs", str(tmp_path))
    built = sorted(p.name for p in tmp_path.iterdir())
    assert built == sorted(ASSETS), "web/build.mjs and explorer.ASSETS disagree on the files"
    stale = [name for name in built if (tmp_path / name).read_bytes() != (STATIC / name).read_bytes()]
    assert not stale, f"processors/gateway/static/{stale} differ from web/: run `make web` and commit"
