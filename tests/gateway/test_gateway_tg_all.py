"""Every command of trustgraph-cli 2.11.1 (its `tg-*` entry points, read from the installed package's
metadata) against `kgflow up`, counted as works / refused / outside / hangs.

- works: exits 0 (or as the case says), prints no exception, and prints what proves it did its job;
- refused: ends within REFUSE_S seconds printing "not supported by kgflow" (the gateway's refusal);
- outside: does not talk to the gateway (TrustGraph's own Pulsar queues) and ends within REFUSE_S
  seconds with its own error, or the client hides the gateway's refusal but ends within REFUSE_S;
- slow: a refused / outside / empty command that ended, but after REFUSE_S seconds (a failure);
- hangs: still running at its deadline (killed).
Independent commands run concurrently; state-dependent ones in phases. The table in docs/clients.md
must say the same as this run (checked at the end).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from importlib.metadata import distribution
from pathlib import Path

import pytest
from gw_support import BIN, ROOT, UpServer, pq2h_questions

from tests.documents.format_files import text_pdf

pytestmark = pytest.mark.timeout(900)
REFUSE_S = 5.0
KILL_S = 30.0  # a refusal still running then is a hang (killed); one that ends after REFUSE_S still fails
REFUSALS = 9  # the phase of refusals: one at a time, so a client's own start-up (~2 s of imports) stays short
WORK_S = 120.0
NOT_SUPPORTED = "not supported by kgflow"
DOCS = ROOT / "docs" / "clients.md"


@dataclass(frozen=True)
class Case:
    """How to run one command and what its output must show."""

    args: tuple[str, ...]
    expect: str = ""  # works: a regex the output must match; "" for refused / outside
    kind: str = "works"  # works | refused | outside | empty
    phase: int = 1  # refused / outside cases run in phase REFUSALS unless they say otherwise
    codes: tuple[int, ...] = (0,)
    interrupt_after: str | None = None  # works until interrupted: SIGINT once this regex is printed
    allow: str | None = None  # an exception the client itself raises after doing its job


@dataclass
class Outcome:
    command: str
    verdict: str
    seconds: float
    output: str = field(repr=False)


def _commands() -> list[str]:
    eps = distribution("trustgraph-cli").entry_points
    return sorted(e.name for e in eps if e.group == "console_scripts" and e.name.startswith("tg-"))


def _cases(url: str, tmp: Path, up: UpServer) -> dict[str, Case]:  # noqa: PLR0915 - one table, read top to bottom
    s = uuid.uuid4().hex[:8]
    u = ("-u", url)
    metrics = ("-m", f"{url}/api/metrics")
    coll, docs, scratch = up.collection, f"lib-{s}", f"ttl-{s}"
    question, gold = pq2h_questions(1)[0]
    (tmp / "kb.ttl").write_text(
        "@prefix ex: <http://example.org/> .\n@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .\n"
        f'ex:zorblax rdfs:label "zorblax {s}" ; ex:orbits ex:quuxar .\nex:quuxar rdfs:label "quuxar prime" .\n'
    )
    _cores(tmp)
    lamp = "The Skerry Light was kept by Maren Tofte, who logged every passing ship."
    (tmp / "lamp.txt").write_text(lamp)
    (tmp / "lamp.pdf").write_bytes(text_pdf("Skerry Light", [lamp]))  # the library processes PDFs (issue 41)
    blueprint = {"description": "bp", "parameters": {},
                 "processors": {n: {} for n in ("embeddings", "graph-embeddings", "triples", "label-resolver",
                                                "graph-rag", "text-completion")}}  # fmt: skip
    refused = Case((*u,), kind="refused", phase=REFUSALS)
    return {
        # --- graph, embeddings, flows (phase 1: independent) ---
        "tg-invoke-graph-rag": Case((*u, "-q", question, "-C", coll), re.escape(gold.replace("_", " "))),
        "tg-show-graph": Case((*u, "-C", coll, "-l", "5"), r"http://kgflow.org/e/"),
        "tg-graph-to-turtle": Case((*u, "-C", coll, "-l", "20"), r"kgflow.org/e/"),
        "tg-query-graph": Case(
            (*u, "-C", coll, "-s", "http://kgflow.org/e/frederica_of_mecklenburg-strelitz"),
            r"http://kgflow.org/r/spouse",
        ),  # fmt: skip
        "tg-invoke-embeddings": Case((*u, "marie curie"), r"\[-?0\.\d+"),
        "tg-invoke-graph-embeddings": Case((*u, "-c", coll, "-l", "3", "ernest augustus"), r"1\. http://kgflow"),
        "tg-invoke-llm": Case((*u, "You are brief.", "Say hi"), r"No language model is configured"),
        "tg-invoke-reranker": Case(
            (*u, "-q", "lighthouse keeper", "a keeper tends the lighthouse lamp", "quince trees grow in the orchard"),
            r"\d\.\d{4} \| query: lighthouse keeper \| doc: a keeper",
        ),  # fmt: skip
        "tg-list-collections": Case(u, re.escape(coll)),
        "tg-show-flows": Case(u, r"\| id\s+\| default"),
        "tg-show-flow-blueprints": Case(u, r"default"),
        "tg-get-flow-blueprint": Case((*u, "-n", "default"), r"graph-rag"),
        "tg-show-processor-state": Case(metrics, r"graph-rag\s+💚"),
        "tg-show-flow-state": Case((*u, *metrics, "-f", "default"), r"lazy-rag\s+💚"),
        "tg-show-token-rate": Case((*metrics, "-n", "1", "-p", "1"), r"Input\s+Output\s+Total"),
        "tg-verify-system-status": Case(("--global-timeout", "30", "--ui-url", url), r"Checks passed: 7/7"),
        "tg-whoami": Case(u, r"roles\s+admin"),
        "tg-show-prompts": Case(u, r"graph-rag-answer:"),
        "tg-show-config": Case(u, r"template\.lazy-rag-summary"),
        "tg-show-kg-cores": refused,
        "tg-load-turtle": Case((*u, "-i", f"doc-{s}", "-C", scratch, str(tmp / "kb.ttl")), r"File loaded"),
        "tg-load-knowledge": Case(
            (*u, "-i", f"kn-{s}", "-C", f"kn-{s}", str(tmp / "kb.ttl")), r"Entity contexts loaded"
        ),  # fmt: skip
        "tg-put-flow-blueprint": Case((*u, "-n", f"bp-{s}", "-c", json.dumps(blueprint))),
        "tg-put-config-item": Case((*u, "--type", "kgflow-test", "--key", f"k-{s}", "--value", '{"v": 1}'), r"set"),
        "tg-set-prompt": Case((*u, "--id", f"greet-{s}", "--prompt", "Say hello to {{name}}."), r"Prompt set"),
        "tg-set-tool": Case(
            (*u, "--id", f"tool-{s}", "--name", "lookup", "--description", "d", "--type", "knowledge-query"), r""
        ),  # fmt: skip
        "tg-set-mcp-tool": Case((*u, "-i", f"mcp-{s}", "--tool-url", "http://127.0.0.1:1/mcp"), r""),
        "tg-set-token-costs": Case((*u, "--model", f"m-{s}", "-i", "1.5", "-o", "2.5"), r""),
        "tg-add-library-document": Case(
            (*u, "--id", f"lamp-{s}", "--name", "Skerry Light", "-k", "application/pdf", str(tmp / "lamp.pdf")),
            r"Loaded successfully",
        ),  # fmt: skip
        # --- phase 2: reads of what phase 1 wrote ---
        "tg-list-config-items": Case((*u, "--type", "kgflow-test"), re.escape(f"k-{s}"), phase=2),
        "tg-get-config-item": Case((*u, "--type", "kgflow-test", "--key", f"k-{s}"), r'"v": 1', phase=2),
        "tg-show-tools": Case(u, re.escape(f"tool-{s}"), phase=2),
        "tg-show-mcp-tools": Case(u, re.escape(f"mcp-{s}"), phase=2),
        # tg-set-token-costs writes type `token-costs`, tg-show-token-costs reads `token-cost` (2.11.1 itself)
        "tg-show-token-costs": Case(u, r"model \| input, \$/Mt", phase=2),
        "tg-invoke-prompt": Case((*u, f"greet-{s}", "name=Ada"), r"No language model is configured", phase=2),
        "tg-export-workspace-config": Case((*u, "-o", str(tmp / "ws.json")), r"", phase=2),
        "tg-show-library-documents": Case(u, re.escape(f"lamp-{s}"), phase=2),
        "tg-get-document-content": Case((*u, f"lamp-{s}", "-o", str(tmp / "got.pdf")), r"Written \d+ bytes", phase=2),
        "tg-start-library-processing": Case((*u, "-d", f"lamp-{s}", "--id", f"p-{s}", "--collection", docs), phase=2),
        "tg-start-flow": Case((*u, "-n", f"bp-{s}", "-i", f"flow-{s}", "-d", "a test flow"), phase=2),
        "tg-delete-collection": Case((*u, "-y", scratch), phase=2),
        # --- phase 3 ---
        "tg-invoke-document-rag": Case((*u, "-q", "Who kept the Skerry Light?", "-C", docs), r"Maren Tofte", phase=3),
        "tg-show-library-processing": Case(u, re.escape(f"p-{s}"), phase=3),
        "tg-import-workspace-config": Case((*u, "-i", str(tmp / "ws.json")), r"", phase=3),
        "tg-delete-config-item": Case((*u, "--type", "kgflow-test", "--key", f"k-{s}"), phase=3),
        "tg-delete-tool": Case((*u, "--id", f"tool-{s}"), r"deleted", phase=3),
        "tg-delete-mcp-tool": Case((*u, "--id", f"mcp-{s}"), r"", phase=3),
        "tg-stop-flow": Case((*u, "-i", f"flow-{s}"), phase=3),
        "tg-save-doc-embeds": Case(
            ("-u", f"{url}/", "-o", str(tmp / "de.msgpack")),
            r"Exiting",
            phase=3,
            interrupt_after=r"Document embeddings:\s+[1-9]",
            allow=r"TypeError: main\(\) missing 1 required positional argument: 'running'",
        ),  # fmt: skip
        # --- phase 4 ---
        "tg-stop-library-processing": Case((*u, "--id", f"p-{s}"), phase=4),
        "tg-remove-library-document": Case((*u, "--identifier", f"lamp-{s}"), phase=4),
        "tg-delete-flow-blueprint": Case((*u, "-n", f"bp-{s}"), phase=4),
        "tg-dump-msgpack": Case(("-i", str(tmp / "de.msgpack")), r'\["de", \{"m": \{"i":', phase=4),
        # --- what kgflow does not have: refused at once ---
        **{
            c: Case((*u, "--user-id", "ada"), kind="refused")
            for c in ("tg-disable-user", "tg-enable-user", "tg-list-api-keys", "tg-reset-password")
        },  # fmt: skip
        "tg-delete-user": Case((*u, "--user-id", "ada", "--yes"), kind="refused"),
        "tg-update-user": Case((*u, "--user-id", "ada", "--name", "Ada"), kind="refused"),
        "tg-list-users": refused,
        "tg-list-workspaces": refused,
        "tg-list-my-workspaces": refused,
        "tg-change-password": Case((*u, "--current", "a", "--new", "b"), kind="refused"),
        "tg-create-api-key": Case((*u, "--user-id", "ada", "--name", "k"), kind="refused"),
        "tg-create-user": Case((*u, "--username", "ada", "--password", "x"), kind="refused"),
        "tg-create-workspace": Case((*u, "--workspace-id", "ws"), kind="refused"),
        "tg-revoke-api-key": Case((*u, "--key-id", "k"), kind="refused"),
        "tg-mint-token": Case((*u, "-w", "default", "--user-context", "{}", "--self"), kind="refused"),
        "tg-bootstrap-iam": refused,
        "tg-login": Case((*u, "--username", "ada", "--password", "x"), kind="refused"),
        "tg-delete-kg-core": Case((*u, "--id", "core"), kind="refused"),
        "tg-get-kg-core": Case((*u, "--id", "core", "-o", str(tmp / "core.bin")), kind="refused"),
        "tg-put-kg-core": Case((*u, "--id", "core", "-i", str(tmp / "core-kg.msgpack")), kind="refused"),
        "tg-load-kg-core": Case((*u, "--id", "core"), kind="refused"),
        "tg-unload-kg-core": Case((*u, "--id", "core"), kind="refused"),
        "tg-get-de-core": Case((*u, "--id", "core", "-o", str(tmp / "de.bin")), kind="refused"),
        "tg-put-de-core": Case((*u, "--id", "core", "-i", str(tmp / "core-de.msgpack")), kind="refused"),
        "tg-invoke-agent": Case((*u, "-q", "hi"), kind="refused"),
        "tg-invoke-mcp-tool": Case((*u, "-n", "x"), kind="refused"),
        "tg-invoke-nlp-query": Case((*u, "-q", "hi"), kind="refused"),
        "tg-invoke-structured-query": Case((*u, "-q", "hi"), kind="refused"),
        "tg-invoke-rows-query": Case((*u, "-q", "{ x }"), kind="refused"),
        "tg-invoke-row-embeddings": Case((*u, "-s", "schema", "hi"), kind="refused"),
        "tg-invoke-document-embeddings": Case((*u, "hi"), kind="refused"),
        "tg-invoke-sparql-query": Case((*u, "-q", "SELECT * WHERE { ?s ?p ?o }"), kind="refused"),
        "tg-invoke-cloze": Case((*u, "-m", "m", "x"), kind="refused"),
        "tg-list-cloze-models": refused,
        "tg-list-models": refused,
        "tg-invoke-decision-scoring": Case((*u, "-s", "{}", "-q", "[]"), kind="refused"),
        "tg-invoke-field-extract": Case((*u, "-s", "{}", "-F", "[]"), kind="refused"),
        "tg-describe-image": Case((*u, "-i", str(tmp / "lamp.txt")), kind="refused"),
        # ends at once and finds nothing: kgflow keeps no explain traces, provenance graphs or parameter types
        "tg-list-explain-traces": Case(u, kind="empty"),
        "tg-show-explain-trace": Case((*u, "q1"), kind="empty"),
        "tg-show-extraction-provenance": Case((*u, "doc"), kind="empty"),
        "tg-show-parameter-types": Case(u, kind="empty"),
        "tg-load-structured-data": Case((*u, "-i", str(tmp / "lamp.txt"), "--auto"), kind="empty"),
        "tg-set-collection": Case((*u, "-n", "name", coll), kind="refused"),
        "tg-export-workspace": Case(
            (*u, "-c", scratch, "-o", str(tmp / "export.tgz"), "--triples-limit", "1000"), r"", phase=2
        ),  # fmt: skip
        "tg-import-workspace": Case(("-u", url, "-w", f"copy-{s}", "-i", str(tmp / "export.tgz")), r"", phase=3),
        # its bundled documents (two PDFs, five markdown) into the library, every one accepted: none "FAILED"
        "tg-load-sample-documents": Case(u, r"^(?![\s\S]*FAILED)[\s\S]*Complete\.", phase=4),
        "tg-load-doc-embeds": Case(("-u", f"{url}/", "-i", str(tmp / "de.msgpack")), kind="outside", phase=REFUSALS),
        # --- TrustGraph's own Pulsar queues, not the gateway ---
        "tg-monitor-prompts": Case((), kind="outside"),
        "tg-dump-queues": Case(("--output", str(tmp / "queues.txt"), "non-persistent://tg/request/x"), kind="outside"),
    }


def _cores(tmp: Path) -> None:
    """Knowledge-core files in the format tg-put-de-core / tg-put-kg-core read (they are refused after)."""
    import msgpack

    de = ["de", {"m": {"i": "d", "m": [], "c": "c"}, "c": [{"i": "ch", "v": [0.5]}]}]
    (tmp / "core-de.msgpack").write_bytes(msgpack.packb(de))
    (tmp / "core-kg.msgpack").write_bytes(msgpack.packb(["t", {"m": {"i": "d", "m": [], "c": "c"}, "t": []}]))


def _run(command: str, case: Case, env_url: str) -> Outcome:
    env = {"TRUSTGRAPH_URL": env_url, "PATH": str(BIN), "HOME": "/tmp", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1"}
    deadline = WORK_S if case.kind == "works" else KILL_S
    began = time.monotonic()
    proc = subprocess.Popen([str(BIN / command), *case.args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env)  # fmt: skip
    if case.interrupt_after:
        return _interrupted(command, case, proc, began)
    try:
        out, _ = proc.communicate(timeout=deadline)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return Outcome(command, "hangs", time.monotonic() - began, out)
    took = time.monotonic() - began
    return Outcome(command, _verdict(case, proc.returncode, out, took), took, out)


def _interrupted(command: str, case: Case, proc: subprocess.Popen[str], began: float) -> Outcome:
    """A command that works until interrupted: SIGINT once it shows its work (or at WORK_S), then it must end."""
    assert proc.stdout is not None and case.interrupt_after is not None
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    while time.monotonic() - began < WORK_S and not re.search(case.interrupt_after, "".join(lines)):
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=REFUSE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        reader.join(5)
        return Outcome(command, "hangs", time.monotonic() - began, "".join(lines))
    reader.join(5)
    out = "".join(lines)
    return Outcome(command, _verdict(case, 0, out, 0.0), time.monotonic() - began, out)


def _without_allowed(out: str, allow: str | None) -> str:
    """The output less the one traceback the client itself is known to raise after its job is done."""
    return re.sub(r"Traceback \(most recent call last\):[\s\S]*?" + allow, "", out) if allow else out


def _verdict(case: Case, code: int, out: str, took: float) -> str:
    if case.kind == "works":
        shown = _without_allowed(out, case.allow)
        clean = "Exception" not in shown and "Traceback" not in shown
        ran = case.interrupt_after is not None or code in case.codes
        return "works" if ran and clean and re.search(case.expect, out) else "failed"
    if took > REFUSE_S:
        return "slow"  # ended, but not at once (a hang is one killed at KILL_S)
    if case.kind == "refused":
        return "refused" if NOT_SUPPORTED in out else "failed"
    return case.kind  # outside / empty: ended at once


def _table(outcomes: list[Outcome]) -> dict[str, str]:
    return {o.command: o.verdict for o in outcomes}


def test_every_trustgraph_command(up_2h: UpServer, tmp_path: Path) -> None:
    commands = _commands()
    cases = _cases(up_2h.url, tmp_path, up_2h)
    assert len(commands) == 103 and set(commands) == set(cases), set(commands) ^ set(cases)
    outcomes: list[Outcome] = []
    cases = {c: case if case.kind == "works" or case.phase != 1 else replace(case, phase=REFUSALS)
             for c, case in cases.items()}  # fmt: skip
    for phase in sorted({c.phase for c in cases.values()}):
        batch = [c for c in commands if cases[c].phase == phase]
        with ThreadPoolExecutor(max_workers=1 if phase == REFUSALS else 4) as pool:
            outcomes += pool.map(lambda c: _run(c, cases[c], f"{up_2h.url}/"), batch)
    verdicts = _table(outcomes)
    counts = {v: sum(1 for x in verdicts.values() if x == v) for v in ("works", "refused", "empty", "outside", "hangs")}
    print("trustgraph-cli 2.11.1 against kgflow up:", json.dumps(counts))
    # each command's verdict, seconds and last output, for a reader of a failed run (and to regenerate the docs)
    (tmp_path / "verdicts.json").write_text(
        json.dumps({o.command: [o.verdict, round(o.seconds, 1), o.output[-800:]] for o in outcomes}, indent=1)
    )
    bad = {o.command: f"{o.verdict} after {o.seconds:.1f}s: {o.output[-1500:]}" for o in outcomes
           if o.verdict in ("failed", "slow", "hangs")}  # fmt: skip
    assert not bad, json.dumps(bad, indent=1)
    assert counts["works"] >= 45 and counts["hangs"] == 0, counts
    text = DOCS.read_text()
    row = re.compile(r"^\| `(tg-[a-z-]+)` \| (works|refused|empty|outside) \|", re.MULTILINE)
    documented = dict(row.findall(text))
    assert documented == verdicts, {c: (documented.get(c), v) for c, v in verdicts.items() if documented.get(c) != v}
    assert f"**{counts['works']} work**" in text and f"**{counts['refused']} are refused**" in text, counts
