"""`kgflow load`, `query` and `documents` with `--url` and a token bound to a workspace: with no
`-U` they act in the token's workspace (the gateway names it on connecting); an `-U` naming
another workspace is refused."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from gw_support import BIN, ROOT, kgflow_up, up_env

ALICE = "bound-alice-token"


@pytest.fixture(scope="module")
def bound_up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`kgflow up` over an empty home; one token, bound to workspace `alice`."""
    root = tmp_path_factory.mktemp("gw-bound")
    tokens = root / "tokens"
    tokens.write_text(f"{ALICE} alice\n", encoding="utf-8")
    with kgflow_up(root / "home", up_env(KGFLOW_GATEWAY_TOKEN_FILE=str(tokens))) as url:
        yield url


def kgflow(*args: str) -> subprocess.CompletedProcess[str]:
    """The `kgflow` command as a client of the running server."""
    return subprocess.run([str(BIN / "kgflow"), *args], capture_output=True, text=True, timeout=300, env=up_env(),
                          check=False)  # fmt: skip


def test_load_documents_acts_in_the_bound_workspace(bound_up: str, tmp_path: Path) -> None:
    doc = tmp_path / "curie.txt"
    doc.write_text("Marie Curie coined the word radioactivity in Paris.\n", encoding="utf-8")
    loaded = kgflow("load", "documents", str(doc), "--url", bound_up, "--token", ALICE, "-C", "c", "--no-progress")
    assert loaded.returncode == 0, loaded.stderr
    assert "loaded 1 document" in loaded.stderr and "into alice/c" in loaded.stderr

    listed = kgflow("documents", "list", "--url", bound_up, "--token", ALICE, "-C", "c")
    assert listed.returncode == 0 and "curie.txt" in listed.stdout, listed.stderr

    refused = kgflow("load", "documents", str(doc), "--url", bound_up, "--token", ALICE, "-U", "bob", "--no-progress")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "may not act in workspace 'bob'" in refused.stderr


def test_load_triples_acts_in_the_bound_workspace(bound_up: str) -> None:
    sample = ROOT / "examples" / "sample.tsv"
    loaded = kgflow("load", "triples", str(sample), "--url", bound_up, "--token", ALICE, "-C", "t", "--no-progress")
    assert loaded.returncode == 0, loaded.stderr
    assert "into alice/t through flow 'default'" in loaded.stderr

    question = "Where was marie_curie's husband born?"
    asked = kgflow("query", "graph-rag", question, "--url", bound_up, "--token", ALICE, "-C", "t", "--json", "--no-llm")
    assert asked.returncode == 0, asked.stderr
    assert ("pierre curie", "place of birth", "paris") in {
        (t["s"], t["p"], t["o"]) for t in json.loads(asked.stdout)["triples"]
    }

    refused = kgflow("load", "triples", str(sample), "--url", bound_up, "--token", ALICE, "-U", "bob", "--no-progress")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "may not act in workspace 'bob'" in refused.stderr
