"""docs/architecture.md's picture of the code, checked: role folders on floors that imports only ever
go down, no import cycle anywhere, no module loaded by a dotted string, schemas stand alone, algorithm
modules import no bus code, no file over 400 lines, and the processor registry matches the classes
(each request operation has its handler)."""

from __future__ import annotations

import ast
import typing
from collections.abc import Collection
from pathlib import Path

import pytest

from processors.base.bus import MemoryBus
from processors.base.settings import RuntimeSettings
from processors.commands.catalog import FLOW_PROCESSORS, PROCESSORS

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("schemas", "processors", "bench")  # every package of the code, checked for cycles and string loads
MAX_LINES = 400
# The floors, bottom first: a module imports only from its own role or a lower floor. Roles that
# share a floor import nothing of each other: the stores and the framework (base), ingest (writers)
# and query (readers).
FLOORS: tuple[tuple[str, ...], ...] = (
    ("algorithms", "accounting"),
    ("stores", "base"),
    ("services",),
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


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    """The project module an imported name is, or lives in (None: not the project's)."""
    parts = name.split(".")
    return next((".".join(parts[:i]) for i in range(len(parts), 0, -1) if ".".join(parts[:i]) in mods), None)


def _targets(tree: ast.AST, mods: dict[str, Path]) -> set[str]:
    """The project modules a file imports: `from pkg import sub` is sub (pkg's __init__ is only loaded
    on the way), `from pkg import name` is pkg, and so is `import pkg.sub`'s longest known prefix."""
    found: set[str | None] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(_resolve(a.name, mods) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in mods else _resolve(node.module, mods))
    return {t for t in found if t}


def _graph(packages: tuple[str, ...] = ("processors",)) -> dict[str, set[str]]:
    """Module -> the project modules it imports, over `packages` (a module's own name excluded)."""
    mods = {name: path for package in packages for name, path in _modules(package).items()}
    return {m: _targets(ast.parse(path.read_text()), mods) - {m} for m, path in mods.items()}


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


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """One cycle per strongly connected knot the depth-first walk meets, as `a -> b -> a`."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycles: list[str] = []

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                cycles.append(" -> ".join([*path[path.index(n) :], n]))
            elif n not in state:
                visit(n, [*path, n])
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [m])
    return cycles


def test_no_import_cycle_anywhere() -> None:
    assert import_cycles(_graph(PROJECT)) == []


def test_an_import_cycle_is_caught() -> None:
    before = set(import_cycles(_graph(PROJECT)))
    graph = _graph(PROJECT)
    graph["bench.harness.stats"].add("bench.graph.measure")  # measure imports stats: a cycle
    graph["schemas.base"].add("schemas.flows")  # flows imports base
    new = set(import_cycles(graph)) - before
    assert any("bench.harness.stats -> bench.graph.measure" in c for c in new), new
    assert any("schemas.base -> schemas.flows" in c for c in new), new


def test_a_package_importing_back_its_submodule_is_a_cycle() -> None:
    mods = {"pkg": Path("pkg/__init__.py"), "pkg.sub": Path("pkg/sub.py")}
    graph = {
        "pkg": _targets(ast.parse("def f():\n    from pkg import sub"), mods),
        "pkg.sub": _targets(ast.parse("from pkg import Shared"), mods),
    }
    assert import_cycles(graph) == ["pkg -> pkg.sub -> pkg"]


def _loading_nothing(tree: ast.AST) -> set[int]:
    """The ids of the string nodes that load nothing: docstrings, and `"pkg.mod" in sys.modules`
    (which asks whether a module is loaded)."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    loaded_checks = {
        id(node.left)
        for node in ast.walk(tree)
        if isinstance(node, ast.Compare) and ast.unparse(node.comparators[0]) == "sys.modules"
    }
    return docstrings | loaded_checks


def dotted_loads(sources: dict[str, str], known: Collection[str]) -> list[str]:
    """Every string in `sources` naming a `known` module, as `pkg.mod` or `pkg.mod:attr`: a module
    loaded by such a string is an import no reader, linter or this file's import checks can see."""
    found = []
    for name, text in sorted(sources.items()):
        tree = ast.parse(text)
        skip = _loading_nothing(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
                if "." in node.value and node.value.partition(":")[0] in known:
                    found.append(f"{name}: {node.value!r}")
    return found


def _project_sources() -> dict[str, str]:
    return {n: p.read_text() for package in PROJECT for n, p in _modules(package).items()}


def test_no_module_is_loaded_by_a_dotted_string() -> None:
    sources = _project_sources()
    assert dotted_loads(sources, set(sources)) == []


def test_a_dotted_string_load_is_caught() -> None:
    sources = _project_sources()
    injected = {
        "bench.harness.stats": sources["bench.harness.stats"] + 'importlib.import_module("bench.graph.measure")\n',
        "schemas.topics": sources["schemas.topics"] + 'TARGET = "processors.stores.factory:open_stores"\n',
    }
    assert dotted_loads(injected, set(sources)) == [
        "bench.harness.stats: 'bench.graph.measure'",
        "schemas.topics: 'processors.stores.factory:open_stores'",
    ]


def test_no_file_is_over_400_lines() -> None:
    long = {
        str(f.relative_to(ROOT)): n
        for package in (*PROJECT, "tests")
        for f in (ROOT / package).rglob("*.py")
        if (n := len(f.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


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
