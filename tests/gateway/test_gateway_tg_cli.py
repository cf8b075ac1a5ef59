"""The real trustgraph-cli 2.11.1 commands against `kgflow up` with PathQuestion 2H loaded.

The tg-* commands print `Exception: ...` and still exit 0 on failure, so every test asserts output.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid

from gw_support import BIN, UpServer, pq2h_questions


def tg(command: str, *args: str, timeout: float = 120) -> str:
    """Run a tg-* command; it must exit 0 without printing an exception. Returns stdout + stderr."""
    proc = subprocess.run([str(BIN / command), *args], capture_output=True, text=True, timeout=timeout, check=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{command} exited {proc.returncode}:\n{out}"
    assert "Exception" not in out and "Traceback" not in out, f"{command} failed:\n{out}"
    return out


def test_tg_invoke_graph_rag_finds_gold_answers(up_2h: UpServer) -> None:
    for question, gold in pq2h_questions(1000)[::250]:  # four different 2H questions
        out = tg("tg-invoke-graph-rag", "-u", up_2h.url, "-q", question, "-C", up_2h.collection)
        assert gold.replace("_", " ") in out.lower(), (question, gold, out)
        assert "Sources:" in out and "http://kgflow.org/e/" in out


def test_tg_show_graph(up_2h: UpServer) -> None:
    out = tg("tg-show-graph", "-u", up_2h.url, "-C", up_2h.collection, "-l", "100000")
    lines = out.splitlines()
    # 1211 edges + one rdfs:label per entity (1056) and relation (13)
    assert len(lines) == 1211 + 1056 + 13
    assert (
        "http://kgflow.org/e/ludwig_ii_of_bavaria http://kgflow.org/r/parents "
        "http://kgflow.org/e/maximilian_ii_of_bavaria" in lines
    )


def test_tg_query_graph(up_2h: UpServer) -> None:
    subject = "http://kgflow.org/e/frederica_of_mecklenburg-strelitz"
    out = tg("tg-query-graph", "-u", up_2h.url, "-C", up_2h.collection, "-s", subject)
    assert f"{subject} http://kgflow.org/r/spouse http://kgflow.org/e/ernest_augustus_i_of_hanover" in out
    assert '"frederica of mecklenburg-strelitz"' in out  # the label literal
    out = tg("tg-query-graph", "-u", up_2h.url, "-C", up_2h.collection, "-s", subject, "--format", "json")
    assert {"t": "i", "i": "http://kgflow.org/r/spouse"} in [t["p"] for t in json.loads(out)]


def test_tg_invoke_embeddings(up_2h: UpServer) -> None:
    out = tg("tg-invoke-embeddings", "-u", up_2h.url, "marie curie")
    vector = json.loads(out.strip().splitlines()[-1])
    assert len(vector) == 384 and abs(sum(x * x for x in vector) - 1.0) < 1e-3


def test_tg_invoke_graph_embeddings(up_2h: UpServer) -> None:
    out = tg("tg-invoke-graph-embeddings", "-u", up_2h.url, "-c", up_2h.collection, "-l", "3", "ernest augustus")
    lines = out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("1. http://kgflow.org/e/ernest_augustus")


def test_tg_flow_blueprint_start_and_show(up_2h: UpServer) -> None:
    suffix = uuid.uuid4().hex[:8]
    bp, flow = f"bp-{suffix}", f"flow-{suffix}"
    definition = {
        "description": "a test blueprint",
        "processors": {
            n: {}
            for n in ("embeddings", "graph-embeddings", "triples", "label-resolver", "graph-rag", "text-completion")
        },
        "parameters": {"entity-limit": 10},
    }
    tg("tg-put-flow-blueprint", "-u", up_2h.url, "-n", bp, "-c", json.dumps(definition))
    assert bp in tg("tg-show-flow-blueprints", "-u", up_2h.url)
    tg(
        "tg-start-flow",
        "-u",
        up_2h.url,
        "-n",
        bp,
        "-i",
        flow,
        "-d",
        f"test flow {suffix}",
        "--param",
        "triple-limit=20",
    )
    shown = tg("tg-show-flows", "-u", up_2h.url)
    assert f"| id         | {flow}" in shown and f"| blueprint  | {bp}" in shown and f"test flow {suffix}" in shown
    assert "triple-limit: 20" in shown
    question, gold = pq2h_questions(1)[0]
    deadline = time.monotonic() + 60  # the processors pick the new flow up from the config push
    while True:
        proc = subprocess.run(
            [str(BIN / "tg-invoke-graph-rag"), "-u", up_2h.url, "-f", flow, "-q", question, "-C", up_2h.collection],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if gold.replace("_", " ") in proc.stdout.lower() or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert gold.replace("_", " ") in proc.stdout.lower(), proc.stdout + proc.stderr
    tg("tg-stop-flow", "-u", up_2h.url, "-i", flow)
    assert flow not in tg("tg-show-flows", "-u", up_2h.url)


def test_tg_load_turtle(up_2h: UpServer, tmp_path) -> None:  # type: ignore[no-untyped-def]
    suffix = uuid.uuid4().hex[:8]
    collection = f"ttl-{suffix}"
    ttl = tmp_path / "data.ttl"
    ttl.write_text(
        "@prefix ex: <http://example.org/> .\n"
        "@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        f'ex:zorblax rdfs:label "zorblax the {suffix}" ; ex:orbits ex:quuxar .\n'
        'ex:quuxar rdfs:label "quuxar prime" .\n'
    )
    out = tg("tg-load-turtle", "-u", up_2h.url, "-i", f"doc-{suffix}", "-C", collection, str(ttl), timeout=60)
    assert "File loaded." in out
    deadline = time.monotonic() + 30  # the client does not wait for the write; poll until it is visible
    while True:
        out = tg("tg-show-graph", "-u", up_2h.url, "-C", collection)
        if len(out.splitlines()) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.3)
    assert "http://example.org/zorblax http://example.org/orbits http://example.org/quuxar" in out.splitlines()
    assert len(out.splitlines()) == 3
    found = tg("tg-invoke-graph-embeddings", "-u", up_2h.url, "-c", collection, "-l", "1", f"zorblax the {suffix}")
    assert "1. http://example.org/zorblax" in found  # labels were embedded on import
