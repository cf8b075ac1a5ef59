"""Tune a ranking knob on one half of a doc-QA set: lazy-rag's recall@2/5/10 (no model) for each
value of flow parameters of the documents service (graphrank: PassageRankParams) or of lazy-rag
(LazyRagSettings), from the benchmark's cached home of the set's variant.

    python -m bench tune --set musique --variant titles --half tuning --param hops=1,2,3
                               [--param hop-decay=0.5,1.0 ...] [--questions N] [--json]
    python -m bench tune ... --half validation --confirm    # confirm a choice made on tuning
    python -m bench tune ... --embedder bge-small           # another embedder: its own index

Several --param options make a grid. Each setting (the defaults first) runs as its own flow with
those parameters (as `kgflow flow start --param` would start it) over the same store. Choose on
the tuning half; the validation half only confirms, so it is refused without --confirm
(bench/README.md, documents: the protocol). A default changed after tuning gets its label in
bench/docqa/defaults.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from pydantic import BaseModel

from bench.docqa.collection import COLLECTION, TIMEOUT_S, USER, client
from bench.docqa.defaults import MODELS
from bench.docqa.halves import halves
from bench.docqa.homes import DEFAULT_EMBEDDER, EMBEDDERS, SETS, VARIANTS, embedder_params, indexed_home, questions
from bench.docqa.protocol import HALVES, mean_recall
from bench.docqa.quality import recall
from bench.harness.stats import load_average, percentile
from processors.base.config_client import config_client
from processors.base.settings import RuntimeSettings, flow_params
from processors.commands.catalog import FLOW_PROCESSORS
from processors.commands.system import System, embedded
from processors.stores.settings import StoreSettings
from schemas.flows import FlowRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.services import LAZY_RAG

FLOW_PREFIX = "tune-"
REFUSED = (
    "refusing to tune on the validation half: choose on --half tuning, then confirm the choice on "
    "validation with --confirm (bench/README.md, documents: the protocol)"
)


def log(msg: str) -> None:
    """Progress on stderr."""
    print(msg, file=sys.stderr, flush=True)


def check_half(half: str, confirm: bool) -> None:
    """Refuse the validation half unless the choice is being confirmed (SystemExit with the reason)."""
    if half == "validation" and not confirm:
        raise SystemExit(f"bench tune: {REFUSED}")


def readers(name: str) -> list[str]:
    """The processors (of the tunable ones) whose flow parameters include `name`."""
    return [p for p, model in MODELS.items() if name in model.model_fields]


def every_reader(name: str) -> list[str]:
    """Every flow processor that reads parameter `name` (flow parameters are one flat set)."""
    return [p.name for p in FLOW_PROCESSORS if (m := p.params) is not None and name in m.model_fields]


def parse_param(spec: str) -> tuple[str, list[str]]:
    """`NAME=V1,V2,...` (kebab- or snake-case name) -> (snake_name, values); a name no tunable
    processor reads, or a value its settings reject, is a ValueError saying so."""
    name, sep, values = spec.partition("=")
    key = name.strip().replace("-", "_")
    if not sep or not key or not values.strip():
        raise ValueError(f"--param {spec!r}: expected NAME=V1,V2,...")
    owners = readers(key)
    if not owners:
        known = sorted({f.replace("_", "-") for m in MODELS.values() for f in m.model_fields})
        raise ValueError(f"--param {name!r}: not a parameter of {' or '.join(MODELS)}; known: {', '.join(known)}")
    out = [v.strip() for v in values.split(",") if v.strip()]
    for v in out:
        for owner in owners:
            model: type[BaseModel] = MODELS[owner]
            flow_params(model, {key: v})  # raises ValueError naming the parameter
    return key, out


def grid(params: Sequence[tuple[str, list[str]]]) -> list[dict[str, str]]:
    """Every combination of the values (flow parameters by their flow names), the defaults first."""
    names = [n.replace("_", "-") for n, _ in params]
    combos = [dict(zip(names, values, strict=True)) for values in itertools.product(*(v for _, v in params))]
    return [{}, *(c for c in combos if c)]


@contextlib.asynccontextmanager
async def flow_with(system: System, flow_id: str, parameters: dict[str, str]) -> AsyncIterator[str]:
    """Flow `flow_id` of the default blueprint with `parameters`, served by every processor while
    the block runs, stopped afterwards."""
    cfg = config_client(system.bus)
    served = [p for p in system.processors if hasattr(p, "flow_ids")]
    try:
        await _flow_op(cfg, FlowRequest(operation="start-flow", flow_id=flow_id, blueprint_name="default",
                                        parameters=parameters))  # fmt: skip
        try:
            await _wait(lambda: all(flow_id in p.flow_ids for p in served))
            yield flow_id
        finally:
            await _flow_op(cfg, FlowRequest(operation="stop-flow", flow_id=flow_id))
            await _wait(lambda: not any(flow_id in p.flow_ids for p in served))
    finally:
        await cfg.stop()


async def _flow_op(cfg: Any, req: FlowRequest) -> None:
    res = await cfg.request(req)
    if res.error:
        raise RuntimeError(f"{req.operation} {req.flow_id}: {res.error.message}")


async def _wait(done: Callable[[], bool], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("processors did not follow the flow change")
        await asyncio.sleep(0.05)


async def stop_leftovers(system: System) -> None:
    """Stop tuning flows an interrupted run left in the home's flow registry."""
    cfg = config_client(system.bus)
    try:
        ids = (await cfg.request(FlowRequest(operation="list-flows"))).flow_ids or []
        for fid in ids:
            if fid.startswith(FLOW_PREFIX):
                await _flow_op(cfg, FlowRequest(operation="stop-flow", flow_id=fid))
    finally:
        await cfg.stop()


async def evaluate(system: System, flow_id: str, qs: list[dict[str, Any]]) -> dict[str, Any]:
    """lazy-rag (no model) on `qs` in flow `flow_id`: mean recall@k and client-side p50."""
    lazy = client(system, LAZY_RAG, flow_id)
    rows, ms = [], []
    for q in qs:
        began = time.perf_counter()
        res = await lazy.request(LazyRagRequest(user=USER, collection=COLLECTION, query=q["question"], no_llm=True))
        ms.append((time.perf_counter() - began) * 1000)
        rows.append(recall([d.id for d in res.documents], set(q["supporting_paragraph_ids"])))
    return {**mean_recall(rows), "p50_ms": round(percentile(ms, 50), 1)}


async def tune(
    name: str, variant: str, half: str, settings: list[dict[str, str]], limit: int | None,
    embedder: str = DEFAULT_EMBEDDER,
) -> dict[str, Any]:  # fmt: skip
    """Every setting evaluated on one half of one variant, indexed and asked with `embedder`
    (see the module docstring)."""
    built = await indexed_home(name, variant, log, embedder)
    qs = halves(questions(name))[half][:limit]
    rows: list[dict[str, Any]] = []
    load_at_start = load_average()
    model = embedder_params(embedder)
    rt = RuntimeSettings(request_timeout_s=TIMEOUT_S)
    async with embedded(StoreSettings(home=built.home), rt, model) as system:
        await stop_leftovers(system)
        await evaluate(system, "default", qs[:1])  # untimed: the first question loads indexes and caches
        for n, params in enumerate(settings):
            async with flow_with(system, f"{FLOW_PREFIX}{n}", {**model, **params}) as flow_id:
                log(f"[tune] {name}/{variant}/{half}: {params or 'defaults'} ({len(qs)} questions)")
                rows.append({"parameters": params, **await evaluate(system, flow_id, qs)})
    load = {"start": load_at_start, "end": load_average()}
    return {"set": name, "variant": variant, "half": half, "embedder": embedder, "questions": len(qs), "rows": rows,
            "load_average": load}  # fmt: skip


def table(result: dict[str, Any]) -> str:
    """The result as a text table (Δ: recall@5 minus the defaults')."""
    base = result["rows"][0]["recall@5"]
    head = (f"{result['set']} / {result['variant']} / {result['half']} half / {result['embedder']}: "
            f"{result['questions']} questions")  # fmt: skip
    lines = [head, f"{'setting':<40} {'r@2':>6} {'r@5':>6} {'r@10':>6} {'Δr@5':>7} {'p50 ms':>8}"]
    for r in result["rows"]:
        name = " ".join(f"{k}={v}" for k, v in r["parameters"].items()) or "(defaults)"
        lines.append(f"{name:<40} {r['recall@2']:>6.4f} {r['recall@5']:>6.4f} {r['recall@10']:>6.4f} "
                     f"{r['recall@5'] - base:>+7.4f} {r['p50_ms']:>8.1f}")  # fmt: skip
    lines.append(f"load average {result['load_average']['start']} -> {result['load_average']['end']} (2 shared cores)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Parse, refuse the validation half without --confirm, tune, print the table."""
    ap = argparse.ArgumentParser(prog="python -m bench tune", description=__doc__.splitlines()[0])
    ap.add_argument("--set", required=True, choices=sorted(SETS))
    ap.add_argument("--variant", default="titles", choices=VARIANTS)
    ap.add_argument("--half", default="tuning", choices=HALVES)
    ap.add_argument("--param", action="append", default=[], help="NAME=V1,V2,... (repeat for a grid)")
    ap.add_argument("--embedder", default=DEFAULT_EMBEDDER, choices=EMBEDDERS,
                    help="index and ask with this embeddings backend (its own cached home)")  # fmt: skip
    ap.add_argument("--questions", type=int, default=None, help="the first N questions of the half")
    ap.add_argument("--confirm", action="store_true", help="allow the validation half (to confirm a choice)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    a = ap.parse_args(argv)
    check_half(a.half, a.confirm)
    try:
        settings = grid([parse_param(p) for p in a.param])
    except ValueError as e:
        ap.error(str(e))
    for name in {k for s in settings for k in s}:
        log(f"[tune] {name} is read by {', '.join(every_reader(name.replace('-', '_')))}")
    result = asyncio.run(tune(a.set, a.variant, a.half, settings, a.questions, a.embedder))
    print(json.dumps(result, indent=2) if a.json else table(result))
    return result
