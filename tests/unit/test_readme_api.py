"""The Python API example in docs/cli.md runs as written, on the embedded default in a fresh home."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def readme_example() -> str:
    readme = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Python API") :]
    found = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert found, "docs/cli.md's Python API section has no python block"
    return found.group(1)


@pytest.mark.timeout(900)
def test_the_readme_example_runs(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KGFLOW_LLM")}
    env["KGFLOW_HOME"] = str(tmp_path / "home")
    out = subprocess.run([sys.executable, "-c", readme_example()], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines[0] == "loaded 5 documents, 5 chunks; skipped: {}", lines
    assert "paris" in lines[1]  # pierre curie's birthplace, the most relevant fact
    doc, page = lines[2].split()[:2]
    assert doc in {"marie-curie.md", "polonium-and-radium.md"} and page == "None"  # markdown: no pages
    assert any(line.startswith("hybrid [") for line in lines)
    assert "('demo', 0, 92)" in out.stdout and "'flows': ['default']" in out.stdout
    assert any("[100%] completed" in line for line in lines)  # DRIFT's progress, streamed
