"""`kgflow load triples --url`: a file into a running `kgflow up` through its gateway's triples
import route (the flow stores it and embeds its labels), then asked through the same gateway; a
refusal (a flow nobody runs) is a clear error."""

from __future__ import annotations

import json
import subprocess
import uuid

from gw_support import BIN, ROOT, UpServer, up_env

QUESTION = "Where was marie_curie's husband born?"


def kgflow(*args: str) -> subprocess.CompletedProcess[str]:
    """The `kgflow` command (a client of the running server only: no --home of its own)."""
    return subprocess.run([str(BIN / "kgflow"), *args], capture_output=True, text=True, timeout=300, env=up_env(),
                          check=False)  # fmt: skip


def test_load_triples_into_a_running_kgflow_up(up_2h: UpServer) -> None:
    collection = f"url-{uuid.uuid4().hex[:8]}"
    sample = ROOT / "examples" / "sample.tsv"
    loaded = kgflow("load", "triples", str(sample), "--url", up_2h.url, "-C", collection, "--no-progress")
    assert loaded.returncode == 0, loaded.stderr
    lines = sum(1 for _ in sample.read_text().splitlines() if _.strip())
    assert f"into default/{collection} through flow 'default' at {up_2h.url}" in loaded.stderr
    assert int(loaded.stderr.split("stored ")[1].split()[0]) >= lines  # each line: an edge and its fields' labels

    asked = kgflow("query", "graph-rag", QUESTION, "--url", up_2h.url, "-C", collection, "--json", "--no-llm")
    assert asked.returncode == 0, asked.stderr
    res = json.loads(asked.stdout)
    assert ("pierre curie", "place of birth", "paris") in {(t["s"], t["p"], t["o"]) for t in res["triples"]}
    st = res["stats"]  # the store counts ride along through the gateway
    assert st["store_requests"] >= st["store_round_trips"] > 0 and st["stage_store_requests"]["embed"] == 0

    refused = kgflow("load", "triples", str(sample), "--url", up_2h.url, "-C", collection, "--flow", "nosuch",
                     "--no-progress")  # fmt: skip
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "the gateway refused triples" in refused.stderr and "nosuch" in refused.stderr
