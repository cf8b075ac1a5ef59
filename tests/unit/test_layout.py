"""DESIGN.md's picture of the code, checked: role folders on floors that imports only ever go down,
no import cycles, schemas stand alone, algorithm modules import no bus code, and the processor
registry matches the classes (each request operation has its handler)."""

from __future__ import annotations

import ast
import typing
from pathlib import Path

import pytest

from processors.base.bus import MemoryBus
from processors.base.settings import RuntimeSettings
from processors.commands.catalog import FLOW_PROCESSORS, PROCESSORS

ROOT = Path(__file__).resolve().parents[2]
# The floors, bottom first: a module imports only from its own role or a lower floor. ingest
# (writers) and query (readers) share a floor and import nothing of each other.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("algorithms",),
    ("stores",),
    ("base",),
    ("models",),
    ("ingest", "query"),
    ("retrieval",),
    ("gateway",),
    ("commands",),
)
ROLES = {role for floor in FLOORS for role in floor}
FLOOR_OF = {role: n for n, floor in enumerate(FLOORS) for role in floor}
# The framework's bus-facing modules: an algorithm module imports none of them.
BUS_CODE = (
    "processors.base.bus",
    "processors.base.pulsar_bus",
    "processors.base.client",
    "processors.base.processor",
    "processors.base.config_client",
    "processors.base.flow_registry",
    "processors.base.runtime",
    "processors.base.metrics",
    "processors.gateway",
)


def _modules(package: str) -> dict[str, Path]:
    out = {}
    for f in (ROOT / package).rglob("*.py"):
        name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = f
    return out


def _imports(path: Path) -> set[str]:
    """Every module named by an import statement anywhere in the file (function-level ones too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


def _graph() -> dict[str, set[str]]:
    mods = _modules("processors")
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, path in mods.items():
        for target in _imports(path):
            parts = target.split(".")
            known = next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in mods), None)
            if known and known != m and not m.startswith(known + "."):  # a package's own __init__ is no cycle
                graph[m].add(known)
    return graph


def test_processors_sit_in_the_role_folders() -> None:
    packages = {p.name for p in (ROOT / "processors").iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert packages <= ROLES, packages - ROLES


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import from a role to a higher floor's role, or to the other role of its floor."""
    bad = []
    for m, targets in sorted(graph.items()):
        role = m.split(".")[1] if m.count(".") else ""
        for t in sorted(targets):
            other = t.split(".")[1] if t.count(".") else ""
            if role in FLOOR_OF and other in FLOOR_OF and other != role and FLOOR_OF[other] >= FLOOR_OF[role]:
                bad.append(f"{m} -> {t}")
    return bad


def test_imports_only_go_down_a_floor() -> None:
    assert upward_imports(_graph()) == []


def test_an_upward_import_is_caught() -> None:
    graph = _graph()
    graph["processors.stores.factory"].add("processors.retrieval.common")  # stores -> retrieval
    graph["processors.query.triples.service"].add("processors.ingest.triples.loader")  # query -> ingest
    assert upward_imports(graph) == [
        "processors.query.triples.service -> processors.ingest.triples.loader",
        "processors.stores.factory -> processors.retrieval.common",
    ]


def test_no_import_cycle_inside_processors() -> None:
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                pytest.fail("import cycle: " + " -> ".join([*path[path.index(n) :], n]))
            if n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])


def test_schemas_import_nothing_from_processors() -> None:
    for name, path in _modules("schemas").items():
        assert not any(i.split(".")[0] == "processors" for i in _imports(path)), name


def test_algorithm_modules_import_no_bus_code() -> None:
    algorithm = [
        (name, path)
        for name, path in _modules("processors").items()
        if name.split(".")[1:2] in (["retrieval"], ["ingest"], ["algorithms"], ["stores"])
        and not name.endswith((".service", ".bus_sources"))
    ]
    algorithm.append(("label cache", ROOT / "processors/query/label_resolver/cache.py"))
    assert len(algorithm) > 8
    for name, path in algorithm:
        bus = [i for i in _imports(path) if i.startswith(BUS_CODE)]
        assert not bus, f"{name} imports bus code: {bus}"


@pytest.mark.parametrize("entry", FLOW_PROCESSORS, ids=lambda e: e.name)
def test_registry_matches_each_processor_class(entry) -> None:  # type: ignore[no-untyped-def]
    cls = entry.cls
    assert cls.name == entry.name
    proc = cls.__new__(cls)  # services() reads no state: no stores or bus needed
    proc.bus, proc.runtime = MemoryBus(), RuntimeSettings()
    specs = proc.services()
    assert [s.service for s in specs] == list(entry.serves)
    for spec in specs:  # a union request: every operation has its row in the handler's table
        union = getattr(spec.service.request, "model_fields", {}).get("root")
        if union is not None:
            assert set(spec.handler.table) == set(typing.get_args(union.annotation))


def test_every_processor_is_registered_once() -> None:
    assert len(PROCESSORS) == len({e.cls for e in PROCESSORS.values()})
