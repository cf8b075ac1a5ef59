"""One backend and size of the document scale benchmark, measured in a process of its own
(bench/documents/scale.py runs it with a time limit and keeps what it wrote so far).

    python -m bench documents-measure --backend sqlite|neo4j --size 10k --built BUILT_JSON
                                --plan PLAN_JSON --out OUT_JSON [--topology embedded|fleet]
                                [--questions N] [--budget-s S] [--warmup-s S]

`embedded` (SQLite's default): every processor in this process on the in-process bus, as `kgflow
query` and `kgflow up` run SQLite; the RSS is this whole process's. `fleet` (Neo4j's only
topology): one OS process per processor over the real Pulsar (bench/documents/fleet.py), on SQLite
every process opening the same home; the RSS is the documents processor's. Questions: lazy-rag
`expand` and kg-query, both without a model.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.docqa.quality import recall
from bench.documents.corpus import USER
from bench.documents.sources import PUBLIC_SETS, SENTENCE_SETS
from bench.documents.stores import collection, store_settings
from bench.harness.stats import load_average, percentile
from processors.base.client import RequestResponseClient
from processors.base.settings import RuntimeSettings
from schemas.documents import DeleteDocuments, IndexedDocument, StoreDocuments
from schemas.kg_query import KgQueryRequest
from schemas.lazy_rag import LazyRagRequest
from schemas.services import DOCUMENT_STORE, KG_QUERY, LAZY_RAG


@dataclass
class Question:
    """A public question and the paragraphs that support it."""

    set: str
    text: str
    gold: set[str]


def public_questions(loaded: set[str] | None = None) -> list[Question]:
    """The public sets' questions, alternating between the sets (a run cut short still samples
    both); with `loaded`, only those whose supporting paragraphs are all loaded."""
    per_set = []
    for name, path in PUBLIC_SETS.items():
        rows = [json.loads(x) for x in (path / "questions.jsonl").read_text().splitlines() if x]
        qs = [Question(name, r["question"], set(r["supporting_paragraph_ids"])) for r in rows]
        per_set.append([q for q in qs if q.gold and (loaded is None or q.gold <= loaded)])
    out = []
    for i in range(max(len(qs) for qs in per_set)):
        out += [qs[i] for qs in per_set if i < len(qs)]
    return out


def warm_up_questions() -> list[str]:
    """Questions asked before timing (the MSFT set's: none of them is timed)."""
    path = SENTENCE_SETS["msft"] / "questions.jsonl"
    questions = [json.loads(x)["question"] for x in path.read_text().splitlines() if x]
    return [q for q in questions if q.strip()]  # one of them is empty


def rss_mb(pid: int | str = "self") -> dict[str, float]:
    """Resident set now and at its peak (MB) of a process, and what the set now holds: `anon` (the
    heap: objects, arrays, caches) and `file` (code, libraries and mapped store files: pages the
    OS page cache holds anyway, shared with every process mapping them), from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)

    def mb(name: str) -> float:
        return round(int(fields[name].split()[0]) / 1024, 1)

    return {"now": mb("VmRSS"), "peak": mb("VmHWM"), "anon": mb("RssAnon"), "file": mb("RssFile")}


@dataclass
class Target:
    """Where the questions and writes go, and whose RSS counts."""

    lazy: RequestResponseClient[Any]
    kg: RequestResponseClient[Any]
    writer: RequestResponseClient[Any]
    pid: int | str
    rss_of: str
    collection: str
    fleet: dict[str, int]  # every process of the fleet by processor (empty when embedded)

    def rss(self) -> dict[str, float]:
        """The RSS of `rss_of` (rss_mb)."""
        return rss_mb(self.pid)

    def fleet_rss_mb(self) -> dict[str, float]:
        """Each fleet process's RSS now (MB)."""
        return {name: rss_mb(pid)["now"] for name, pid in self.fleet.items()}


@contextlib.asynccontextmanager
async def target(backend: str, built: dict[str, Any], timeout_s: float, topology: str) -> AsyncIterator[Target]:
    """Every processor in this process (SQLite only), or each in its own process over Pulsar."""
    params = {"timeout-s": timeout_s, "stage-timeout-s": timeout_s}  # a slow question is measured, not cut
    rt = RuntimeSettings(request_timeout_s=timeout_s, handler_timeout_s=timeout_s)
    coll = collection(backend, built["size"])
    if topology == "embedded":
        from processors.commands.system import embedded

        async with embedded(store_settings(backend, Path(built["home"])), rt, params) as system:
            rss_of = "the embedded process (every processor + this client)"
            yield _target(system.bus, "default", timeout_s, "self", rss_of, coll, {})
        return
    import tempfile

    from bench.documents.fleet import documents_fleet
    from bench.harness.servers import pulsar_url
    from processors.base.pulsar_bus import PulsarBus

    flow = f"docscale-{uuid.uuid4().hex[:10]}"
    env = {"KGFLOW_REQUEST_TIMEOUT_S": str(timeout_s), "KGFLOW_HANDLER_TIMEOUT_S": str(timeout_s)}
    with tempfile.TemporaryDirectory(prefix="docscale-measure-") as tmp:
        store = store_settings(backend, Path(built["home"]) if backend == "sqlite" else Path(tmp))
        async with documents_fleet(store, pulsar_url(), flow, params, env) as fleet:
            bus, pids = PulsarBus(pulsar_url()), fleet.pids()
            t = _target(
                bus, flow, timeout_s, pids["documents"], "the documents processor (its own process)", coll, pids
            )
            try:
                yield t
            finally:
                for c in (t.lazy, t.kg, t.writer):  # their readers before the bus closes them under them
                    await c.stop()
                await bus.close()


def _target(bus: Any, flow: str, timeout_s: float, pid: int | str, rss_of: str, coll: str,
            fleet: dict[str, int]) -> Target:  # fmt: skip
    def client(service: Any) -> RequestResponseClient[Any]:
        return RequestResponseClient.for_service(bus, service, flow, timeout_s)

    return Target(client(LAZY_RAG), client(KG_QUERY), client(DOCUMENT_STORE), pid, rss_of, coll, fleet)


class Recorder:
    """The figures so far, written to `out` after each step (a run killed by its time limit keeps them)."""

    def __init__(self, out: Path, figures: dict[str, Any]) -> None:
        self.out, self.figures = out, figures

    def put(self, **kv: Any) -> None:
        self.figures.update(kv)
        tmp = self.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.figures, indent=2))
        tmp.replace(self.out)


async def _ask(t: Target, service: str, text: str) -> tuple[Any, float]:
    """One question without a model; its response and wall time (ms)."""
    if service == "lazy":
        req: Any = LazyRagRequest(user=USER, collection=t.collection, query=text, operation="expand", no_llm=True)
    else:
        req = KgQueryRequest(user=USER, collection=t.collection, query=text, no_llm=True)
    began = time.perf_counter()
    res = await (t.lazy if service == "lazy" else t.kg).request(req)
    return res, (time.perf_counter() - began) * 1000


def store_requests(res: Any) -> tuple[int | None, str]:
    """The response's store requests (`stats.store_requests` where the stats have it, else
    `stats.store_round_trips`) and which it was."""
    stats = res.stats
    if stats is None:
        return None, "none"
    if getattr(stats, "store_requests", None) is not None:
        return int(stats.store_requests), "stats.store_requests"
    return int(stats.store_round_trips), "stats.store_round_trips"


def _parts(rss: dict[str, float]) -> dict[str, float]:
    return {"anon": rss["anon"], "file": rss["file"]}


def _summary(ms: list[float]) -> dict[str, float]:
    return {"p50_ms": round(percentile(ms, 50), 1), "p95_ms": round(percentile(ms, 95), 1)}


async def warm(t: Target, rec: Recorder, warmup_s: float) -> None:
    """The first question (cold: today it builds the search index), then untimed questions."""
    qs = warm_up_questions()
    res, ms = await _ask(t, "lazy", qs[0])
    rss = t.rss()
    rec.put(first_question_ms=round(ms, 1), first_question_error=res.error.message if res.error else None,
            rss_mb_after_first_question=rss["now"], rss_parts_after_first_question=_parts(rss))  # fmt: skip
    began, asked, cold = time.perf_counter(), 1, [ms]
    while time.perf_counter() - began < warmup_s:
        _, ms = await _ask(t, "lazy", qs[asked % len(qs)])
        cold += [ms][: 5 - len(cold)]  # the first five: what a cold processor answers in
        await _ask(t, "kg", qs[asked % len(qs)])
        asked += 1
    rec.put(warm_up_questions=asked, warm_up_s=round(time.perf_counter() - began, 1),
            cold_p50_ms=round(percentile(cold, 50), 1))  # fmt: skip


async def timed(t: Target, rec: Recorder, questions: list[Question], budget_s: float) -> None:
    """Each public question to lazy-rag and kg-query (until the budget is spent)."""
    lazy_ms, kg_ms, lazy_req, kg_req, lazy_trips, errors = [], [], [], [], [], []
    rows: dict[str, list[dict[str, float]]] = {"all": [], **{name: [] for name in PUBLIC_SETS}}
    kg_rows: list[dict[str, float]] = []
    source = "none"
    began = time.perf_counter()
    for n, q in enumerate(questions):
        if time.perf_counter() - began > budget_s:
            break
        res, ms = await _ask(t, "lazy", q.text)
        if res.error:
            errors.append(f"lazy-rag: {res.error.message}")
        lazy_ms.append(ms)
        r = recall([d.id for d in res.documents], q.gold)
        rows["all"].append(r)
        rows[q.set].append(r)
        count, source = store_requests(res)
        lazy_req.append(count or 0)
        lazy_trips.append(res.stats.store_round_trips if res.stats else 0)
        res, ms = await _ask(t, "kg", q.text)
        if res.error:
            errors.append(f"kg-query: {res.error.message}")
        kg_ms.append(ms)
        kg_rows.append(recall([d.id for d in res.references], q.gold))
        kg_req.append(store_requests(res)[0] or 0)
        if n % 10 == 9 or n == len(questions) - 1:
            mean = {k: round(statistics.fmean(r["recall@5"] for r in v), 4) if v else None for k, v in rows.items()}
            kg = _summary(kg_ms)
            rec.put(
                **_summary(lazy_ms),
                kg_query_p50_ms=kg["p50_ms"],
                kg_query_p95_ms=kg["p95_ms"],
                questions_asked=len(lazy_ms),
                questions_available=len(questions),
                recall_at_5=mean["all"],
                recall_at_5_by_set={k: v for k, v in mean.items() if k != "all"},
                kg_query_recall_at_5=round(statistics.fmean(r["recall@5"] for r in kg_rows), 4),
                store_requests=round(statistics.fmean(lazy_req), 2),
                store_requests_max=max(lazy_req),
                kg_query_store_requests=round(statistics.fmean(kg_req), 2),
                store_requests_counter=source,
                store_round_trips=round(statistics.fmean(lazy_trips), 2),
                store_round_trips_max=max(lazy_trips),
                errors=len(errors),
                first_errors=errors[:3],
                timed_s=round(time.perf_counter() - began, 1),
            )


async def after_writes(t: Target, rec: Recorder, writes: list[IndexedDocument], questions: list[Question]) -> None:
    """A one-document write through the document-store writer, then a question, a few times;
    then the written documents are deleted (through the writer) and one more question asked."""
    rounds, write_ms = [], []
    for i, doc in enumerate(writes):
        began = time.perf_counter()
        res = await t.writer.request(StoreDocuments(user=USER, collection=t.collection, documents=[doc]))
        write_ms.append(round((time.perf_counter() - began) * 1000, 1))
        if res.error:
            raise RuntimeError(f"the write failed: {res.error.message}")
        _, ms = await _ask(t, "lazy", questions[i % len(questions)].text)
        rounds.append(round(ms, 1))
        rec.put(after_write_ms=round(statistics.median(rounds), 1), after_write_rounds_ms=rounds, write_ms=write_ms)
    ids = [d.document.id for d in writes]
    await t.writer.request(DeleteDocuments(user=USER, collection=t.collection, document_ids=ids))
    _, ms = await _ask(t, "lazy", questions[len(writes) % len(questions)].text)
    rss = t.rss()
    rec.put(after_delete_ms=round(ms, 1), rss_mb_after_writes=rss["now"], rss_parts_after_writes=_parts(rss))


async def measure(a: argparse.Namespace) -> dict[str, Any]:
    """Every figure of one backend and size (see the module docstring)."""
    built = json.loads(a.built.read_text())
    plan = json.loads(a.plan.read_text())
    writes = [IndexedDocument.model_validate(x) for x in plan["writes"]]
    questions = public_questions(set(plan["public_ids"]))[: a.questions]
    rec = Recorder(a.out, {"backend": a.backend, "size": a.size, "load_average_at_start": load_average()})
    began = time.perf_counter()
    async with target(a.backend, built, a.question_timeout_s, a.topology) as t:
        rss = t.rss()
        rec.put(start_s=round(time.perf_counter() - began, 1), topology=a.topology, rss_of=t.rss_of,
                rss_mb_at_start=rss["now"], rss_parts_at_start=_parts(rss))  # fmt: skip
        await warm(t, rec, a.warmup_s)
        rec.put(load_average_after_warm_up=load_average())
        await timed(t, rec, questions, a.budget_s)
        rss, fleet = t.rss(), t.fleet_rss_mb()
        rec.put(
            rss_mb=rss["now"],
            rss_mb_peak=rss["peak"],
            rss_parts=_parts(rss),
            load_average_after_questions=load_average(),
        )
        if fleet:  # beside the embedded figure: the same processors, each in its own process
            rec.put(fleet_rss_mb=fleet, fleet_rss_mb_total=round(sum(fleet.values()), 1))
        await after_writes(t, rec, writes, questions)
        rec.put(
            rss_mb_peak=t.rss()["peak"],
            load_average_at_end=load_average(),
            measure_s=round(time.perf_counter() - began, 1),
        )
    return rec.figures


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    ap = argparse.ArgumentParser(prog="python -m bench documents-measure", description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("sqlite", "neo4j"), required=True)
    ap.add_argument("--size", required=True)
    ap.add_argument(
        "--topology",
        choices=("embedded", "fleet"),
        default=None,
        help="every processor in this process (SQLite's default) or each in its own over Pulsar (Neo4j's only)",
    )
    ap.add_argument("--built", type=Path, required=True, help="the build's JSON (bench.documents.stores)")
    ap.add_argument("--plan", type=Path, required=True, help='{"writes": [IndexedDocument], "public_ids": [...]}')
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--questions", type=int, default=None, help="public questions (default all)")
    ap.add_argument("--budget-s", type=float, default=1200.0, help="time for the timed questions")
    ap.add_argument("--warmup-s", type=float, default=30.0)
    ap.add_argument("--question-timeout-s", type=float, default=900.0)
    a = ap.parse_args(argv)
    a.topology = a.topology or ("embedded" if a.backend == "sqlite" else "fleet")
    if a.backend == "neo4j" and a.topology == "embedded":
        ap.error("--topology embedded is SQLite's: Neo4j is measured as deployed, one process per processor")
    return a


async def main(argv: list[str]) -> dict[str, Any]:
    """Measure the backend and size the arguments name (`python -m bench documents-measure`)."""
    return await measure(parse_args(argv))
