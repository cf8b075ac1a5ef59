"""House counts from issue 39: the tenant is one type, not `user: str, collection: str` by hand.

Counted with `ast` (a grep would miss wrapped signatures and count comments), so a regression
that spells the tenant out again in new parameter lists fails here with the offenders named.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 20  # issue 39: 231 before the Tenant type; the wire-facing edges may keep a few


def _is_str(annotation: ast.expr | None) -> bool:
    return annotation is not None and ast.unparse(annotation).strip("'\"") == "str"


def tenant_by_hand(tree: ast.AST) -> list[tuple[str, int]]:
    """(function name, line) of every parameter list with both `user: str` and `collection: str`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            args = node.args
            params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
            typed = {a.arg for a in params if _is_str(a.annotation)}
            if {"user", "collection"} <= typed:
                found.append((getattr(node, "name", "<lambda>"), node.lineno))
    return found


def count_processors() -> list[str]:
    """Every offender under processors/, as `path:line name`."""
    hits = []
    for path in sorted((ROOT / "processors").rglob("*.py")):
        for name, line in tenant_by_hand(ast.parse(path.read_text(), str(path))):
            hits.append(f"{path.relative_to(ROOT)}:{line} {name}")
    return hits


def test_counter_sees_a_hand_spelled_tenant() -> None:
    src = "def f(user: str, collection: str): ...\nasync def g(t, *, user: 'str', collection: str): ...\n"
    src += "def h(user: str, other: str): ...\n"
    assert [n for n, _ in tenant_by_hand(ast.parse(src))] == ["f", "g"]


def test_tenant_spelled_by_hand_at_most_limit() -> None:
    hits = count_processors()
    assert len(hits) <= LIMIT, f"{len(hits)} parameter lists spell out user+collection:\n" + "\n".join(hits)


if __name__ == "__main__":
    for hit in count_processors():
        print(hit)
