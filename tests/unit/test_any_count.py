"""Types are not thrown away: bare `Any` annotations (a parameter, a return, an annotated name) in
processors/ stay at most 40 (136 before the bus and its services were typed). `Any` inside a type
(`dict[str, Any]`) and `*args`/`**kwargs` are not counted: a JSON object's values and a pass-through
really are anything."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 40


def _is_bare_any(node: ast.expr | None) -> bool:
    return (
        (isinstance(node, ast.Name) and node.id == "Any")
        or (isinstance(node, ast.Attribute) and node.attr == "Any")
        or (isinstance(node, ast.Constant) and node.value == "Any")
    )


def bare_any(source: str) -> list[int]:
    """The lines of `source` with a bare `Any` annotation."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            a = node.args
            annotations = [x.annotation for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)] + [node.returns]
        elif isinstance(node, ast.AnnAssign):
            annotations = [node.annotation]
        else:
            continue
        found += [x.lineno for x in annotations if x is not None and _is_bare_any(x)]
    return found


def test_the_counter_sees_parameters_returns_and_names_but_not_nested_any() -> None:
    source = """
from typing import Any
import typing
def f(a: Any, b: dict[str, Any], *args: Any, c: "Any" = 1, **kw: Any) -> typing.Any: ...
x: Any = 1
y: list[Any] = []
"""
    assert bare_any(source) == [4, 4, 4, 5]


def test_processors_hold_at_most_40_bare_any() -> None:
    where = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "processors").rglob("*.py"))
        for line in bare_any(path.read_text())
    ]
    assert len(where) <= LIMIT, f"{len(where)} bare Any annotations (at most {LIMIT}):\n" + "\n".join(sorted(where))
