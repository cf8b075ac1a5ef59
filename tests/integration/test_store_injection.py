"""Injection strings are data on every store backend, and no query text is built from values.

The live part feeds CQL/Cypher/SQL/Lucene fragments as IRIs, labels, literal values, user and
collection names and question text to SQLite, Cassandra and Neo4j; they come back verbatim and
a bystander collection stays intact. The static part parses processors/stores/**/*.py and fails on
any query text formatted from a value that is not a constant.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from schemas.tenant import Tenant
from schemas.terms import RDFS_LABEL, Term
from tests.integration.store_fixtures import StoreBackend, iri, nq, t, unit

INJECTIONS = [
    "x' OR '1'='1",
    '"}) MATCH (n) DETACH DELETE n //',
    "'; DROP TABLE triples; --",
    "`KgEntity`) DETACH DELETE n RETURN `x",
    "label:* OR *",
    '\\"; DROP KEYSPACE kgflow; //',
    "$user {key: $collection}",
    "Robert'); DELETE FROM labels WHERE ('1'='1",
]
BYSTANDER = [t("a", "p1", "b"), t("b", "p2", "c"), t("a", RDFS_LABEL, Term.literal("Alpha"))]


async def snapshot(store: StoreBackend, user: str, coll: str) -> tuple[object, ...]:
    """Everything a reader can see of the bystander collection."""
    return (
        sorted(await store.triples.pattern(Tenant(user, coll), None, None, None, 100), key=repr),
        await store.triples.labels(Tenant(user, coll), ["a", "b"]),
        [h.iri for h in await store.index.search(Tenant(user, coll), unit(1), "Alpha", 10)],
        sorted(await store.index.vectors(Tenant(user, coll), ["a", "b", "p1"])),
    )


@pytest.mark.usefixtures("servers")
async def test_injection_strings_are_data(store: StoreBackend) -> None:
    bystander = store.scope()
    await store.triples.add_triples(Tenant(*bystander), BYSTANDER)
    await store.index.upsert(Tenant(*bystander), [("a", "Alpha", unit(1)), ("b", "Bee", unit(2))], model="unit-test")
    before = await snapshot(store, *bystander)
    assert before[0] and before[1] == {"a": "Alpha"} and before[2][0] == "a"

    tag = bystander[1]
    for n, bad in enumerate(INJECTIONS):
        user, coll = store.scope(bad + tag, bad + "-" + tag)
        other = INJECTIONS[(n + 1) % len(INJECTIONS)]
        graph = [
            t(bad, other, bad),  # a self-loop through an injected predicate
            t(bad, "p", other),
            t(other, "p", Term.literal(bad, language="en")),
            t(bad, RDFS_LABEL, Term.literal(bad)),
            t("plain", "p", Term.literal(bad, datatype=other)),
        ]
        await store.triples.add_triples(Tenant(user, coll), graph)
        await store.index.upsert(
            Tenant(user, coll), [(bad, bad, unit(10 + n)), ("plain", "Alpha", unit(1))], model="unit-test"
        )
        await store.index.upsert(
            Tenant(user, coll), [(other, other, unit(50 + n))], kind="predicate", model="unit-test"
        )

        assert sorted(await store.triples.pattern(Tenant(user, coll), None, None, None, 100), key=repr) == sorted(
            graph, key=repr
        )
        assert set(await store.triples.pattern(Tenant(user, coll), iri(bad), None, None, 100)) == set(
            graph[:2] + graph[3:4]
        )
        assert await store.triples.pattern(Tenant(user, coll), None, iri(other), None, 100) == graph[:1]
        lit = await store.triples.pattern(Tenant(user, coll), None, None, Term.literal(bad, datatype=other), 100)
        assert lit == graph[4:]
        res = await store.triples.neighbours(nq(user, coll, [bad], 10, query_vector=unit(10 + n), max_returned=10))
        assert set(res.triples) == set(graph[:2])
        assert await store.triples.labels(Tenant(user, coll), [bad, other]) == {bad: bad}
        assert set(await store.index.vectors(Tenant(user, coll), [bad, other, "plain"])) == {bad, other, "plain"}
        hits = await store.index.search(Tenant(user, coll), None, f"tell me about {bad} please", 10)
        assert [(h.iri, h.label, h.lexical) for h in hits] == [(bad, bad, True)]  # syntax is no wildcard
        assert [h.iri for h in await store.index.search(Tenant(user, coll), unit(1), bad, 1)] == [bad]

    assert await snapshot(store, *bystander) == before
    for user, coll in store.scopes[1:]:
        await store.triples.delete_collection(Tenant(user, coll))
        await store.index.delete_collection(Tenant(user, coll))
        assert await store.triples.pattern(Tenant(user, coll), None, None, None, 100) == []
        assert await store.index.vectors(Tenant(user, coll), [user[: -len(tag)]]) == {}
    assert await snapshot(store, *bystander) == before


# ---------------------------------------------------------------- static check

QUERY_WORDS = re.compile(
    r"\b(SELECT|INSERT|UPDATE|DELETE|MATCH|MERGE|CREATE|UNWIND|CALL|RETURN|DROP|WHERE|SET|REMOVE|DETACH)\b"
)
EXEC_CALLS = {
    "execute",
    "executemany",
    "executescript",
    "execute_async",
    "prepare",
    "run",
    "read",
    "read_rows",
    "write",
    "autocommit",
}
PASS_THROUGH = {"cypher", "sql", "cql", "query", "queries", "ddl", "statement", "schema"}  # wrappers' query parameters
SANCTIONED = {"cql_identifier", "int_literal"}  # validate an identifier / an int, or raise
STR_METHODS = {"join", "format", "replace", "strip", "upper", "lower"}
Scope = ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda


class QueryTextChecker(ast.NodeVisitor):
    """Finds query text built from non-constant values (see `problems`)."""

    def __init__(self, source: str, root: Path | None = None, seen: frozenset[str] = frozenset()) -> None:
        self.tree = ast.parse(source)
        self.root = root  # the repository: names imported from processors.stores modules are checked there
        self.seen = seen  # "module.name" already being followed (no import cycles)
        self.parent: dict[ast.AST, ast.AST] = {}
        for node in ast.walk(self.tree):
            for child in ast.iter_child_nodes(node):
                self.parent[child] = node

    def scopes(self, node: ast.AST) -> list[Scope]:
        """Enclosing functions, innermost first, then the module."""
        out: list[Scope] = []
        while node in self.parent:
            node = self.parent[node]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda | ast.Module):
                out.append(node)
        return out

    def own_nodes(self, scope: Scope) -> list[ast.AST]:
        """Nodes of `scope` that are not inside a nested function."""
        out, todo = [], list(ast.iter_child_nodes(scope))
        while todo:
            node = todo.pop()
            out.append(node)
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                todo.extend(ast.iter_child_nodes(node))
        return out

    def resolve(self, name: str, at: ast.AST) -> tuple[str, list[ast.expr]]:
        """('param'|'def'|'bound'|'unknown', values bound to `name`) from the scope that binds it."""
        for scope in self.scopes(at):
            if not isinstance(scope, ast.Module) and name in {
                a.arg for a in ast.walk(scope.args) if isinstance(a, ast.arg)
            }:
                return "param", []
            values: list[ast.expr] = []
            for node in self.own_nodes(scope):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.name == name:
                    return "def", []
                if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign | ast.NamedExpr):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    values += [v for tg in targets for v in _bound(tg, name, node.value) if v is not None]
                elif isinstance(node, ast.For | ast.AsyncFor | ast.comprehension):
                    values += (
                        [node.iter]
                        if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.target))
                        else []
                    )
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    obj = node.func.value
                    if (
                        isinstance(obj, ast.Name)
                        and obj.id == name
                        and node.func.attr in ("append", "extend", "insert")
                    ):
                        values += node.args
            if values:
                return "bound", values
        return "unknown", []

    def const(self, e: ast.AST | None, seen: frozenset[str] = frozenset()) -> bool:
        """True when `e` can only evaluate to values built from literals in this file."""
        if e is None or isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.FormattedValue):
            return self.const(e.value, seen)
        if isinstance(e, ast.JoinedStr | ast.Tuple | ast.List | ast.Set):
            return all(self.const(v, seen) for v in (e.values if isinstance(e, ast.JoinedStr) else e.elts))
        if isinstance(e, ast.Dict):
            return all(self.const(v, seen) for v in [*e.keys, *e.values])
        if isinstance(e, ast.BinOp):
            return self.const(e.left, seen) and self.const(e.right, seen)
        if isinstance(e, ast.IfExp):
            return self.const(e.body, seen) and self.const(e.orelse, seen)
        if isinstance(e, ast.Subscript | ast.Starred):
            return self.const(e.value, seen)  # choosing among constants is fine
        if isinstance(e, ast.Call):
            f = e.func
            if isinstance(f, ast.Name) and f.id in SANCTIONED:
                return True
            args = [*e.args, *(k.value for k in e.keywords)]
            if isinstance(f, ast.Attribute) and f.attr in STR_METHODS | {"items", "values", "keys"}:
                return self.const(f.value, seen) and all(self.const(a, seen) for a in args)
            if isinstance(f, ast.Name) and all(self.const(a, seen) for a in args):
                return self.const_function(f.id, e, seen)  # a builder of query text, given constants
            return False
        if isinstance(e, ast.ListComp | ast.SetComp | ast.GeneratorExp):
            return self.const(e.elt, seen) and all(self.const(g.iter, seen) for g in e.generators)
        if isinstance(e, ast.DictComp):
            parts = [e.key, e.value, *(g.iter for g in e.generators)]
            return all(self.const(v, seen) for v in parts)
        if isinstance(e, ast.Name):
            if e.id in seen:
                return True
            kind, values = self.resolve(e.id, e)
            if kind == "unknown":
                return self.imported_const(e.id)
            return kind == "bound" and all(self.const(v, seen | {e.id}) for v in values)
        return False

    def const_function(self, name: str, at: ast.AST, seen: frozenset[str]) -> bool:
        """True when function `name` (defined in this file, or in a processors.stores module it
        imports) returns only values built from literals and its parameters: called with
        constants, it returns a constant."""
        if f"def:{name}" in seen:
            return True  # recursion: the other returns decide
        found = self.function(name, at)
        if found is None:
            return False
        checker, fn = found
        params = frozenset(a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg))
        defaults = [d for d in [*fn.args.defaults, *fn.args.kw_defaults] if d is not None]
        returns = [n.value for n in checker.own_nodes(fn) if isinstance(n, ast.Return)]
        inner = params | {f"def:{name}"}
        return bool(returns) and all(checker.const(v, inner) for v in [*defaults, *returns])

    def function(self, name: str, at: ast.AST) -> tuple[QueryTextChecker, ast.FunctionDef] | None:
        """The module-level def of `name` here, or in the processors.stores module it is imported from."""
        for node in self.tree.body:
            if isinstance(node, ast.FunctionDef) and node.name == name:
                return self, node
        found = self.imported(name)
        return found[0].function(found[1], at) if found else None

    def imported_const(self, name: str) -> bool:
        """True when `name` is imported from a processors.stores module that binds it to a constant."""
        found = self.imported(name)
        if found is None:
            return False
        other, original = found
        kind, values = other.resolve(original, other.tree.body[-1])
        return kind == "bound" and all(other.const(v) for v in values)

    def imported(self, name: str) -> tuple[QueryTextChecker, str] | None:
        """The checker of the processors.stores module `name` is imported from, and its name there."""
        for node in self.tree.body:
            if not (isinstance(node, ast.ImportFrom) and (node.module or "").startswith("processors.stores.")):
                continue
            for alias in node.names:
                where = f"{node.module}.{alias.name}"
                if (alias.asname or alias.name) != name or self.root is None or where in self.seen:
                    continue
                path = self.root / ((node.module or "").replace(".", "/") + ".py")
                return QueryTextChecker(path.read_text(), self.root, self.seen | {where}), alias.name
        return None

    def builder_params(self, node: ast.AST, visiting: frozenset[str] = frozenset()) -> frozenset[str]:
        """The parameters of the function around `node` when it is a private builder of query
        text: a module-level `_name` that this module only ever calls, always with constants (its
        parameters then hold constants); none otherwise."""
        fn = next((s for s in self.scopes(node) if not isinstance(s, ast.Module)), None)
        if not isinstance(fn, ast.FunctionDef) or fn not in self.tree.body or not fn.name.startswith("_"):
            return frozenset()
        params = frozenset(a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg))
        if fn.name in visiting:
            return params  # a cycle: the other call sites decide
        uses = [n for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id == fn.name]
        calls = [n for n in ast.walk(self.tree) if isinstance(n, ast.Call) and n.func in uses]
        if not calls or len(calls) != len(uses):
            return frozenset()
        for call in calls:
            seen = self.builder_params(call, visiting | {fn.name})
            if not all(self.const(a, seen) for a in [*call.args, *(k.value for k in call.keywords)]):
                return frozenset()
        return params

    def passed_through(self, name: ast.Name) -> bool:
        """A callable, or a wrapper's query parameter (its callers' arguments are checked instead)."""
        kind, values = self.resolve(name.id, name)
        if kind == "def" or (kind == "param" and name.id in PASS_THROUGH):
            return True
        return kind == "bound" and all(isinstance(v, ast.Name) and self.passed_through(v) for v in values)

    def problems(self) -> list[str]:
        """Lines where query-looking text is formatted from values, or run from a non-constant."""
        found = []
        for node in ast.walk(self.tree):
            built = isinstance(node, ast.JoinedStr | ast.BinOp) or (
                isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in STR_METHODS
            )
            if built and _looks_like_query(node) and not self.const(node, self.builder_params(node)):
                found.append(f"line {node.lineno}: query text built from a non-constant: {ast.unparse(node)[:80]}")
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in EXEC_CALLS:
                arg = node.args[0] if node.args else None
                if isinstance(arg, ast.Name) and self.passed_through(arg):
                    continue
                checked = ast.Constant | ast.JoinedStr | ast.BinOp | ast.Name | ast.Call
                if isinstance(arg, checked) and not self.const(arg):
                    found.append(f"line {node.lineno}: query run from a non-constant: {ast.unparse(node)[:80]}")
        return found


def _bound(target: ast.expr, name: str, value: ast.expr | None) -> list[ast.expr | None]:
    if isinstance(target, ast.Name):
        return [value] if target.id == name else []
    if isinstance(target, ast.Tuple | ast.List):
        if isinstance(value, ast.Tuple | ast.List) and len(value.elts) == len(target.elts):
            return [v for tg, val in zip(target.elts, value.elts, strict=True) for v in _bound(tg, name, val)]
        return [value] if any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(target)) else []
    return []


def _looks_like_query(node: ast.AST) -> bool:
    return any(
        isinstance(c, ast.Constant) and isinstance(c.value, str) and QUERY_WORDS.search(c.value) for c in ast.walk(node)
    )


BAD = {
    "fstring": "def f(user):\n    sql = f\"SELECT * FROM t WHERE u = '{user}'\"\n    return sql\n",
    "concat": 'def f(session, s):\n    return session.execute("MATCH (n {uri: \'" + s + "\'}) RETURN n")\n',
    "percent": "def f(c):\n    q = \"DELETE FROM t WHERE c = '%s'\" % c\n    return q\n",
    "format": 'def f(x):\n    return "MATCH (n) WHERE n.x = {}".format(x)\n',
    "appended": "def f(conn, x):\n    parts = ['a = ?']\n    parts.append(x)\n"
    "    conn.execute('SELECT a FROM t WHERE ' + ' AND '.join(parts))\n",
    "variable": "def f(tx, name):\n    cypher = 'MATCH (n:' + name + ') RETURN n'\n    tx.run(cypher)\n",
    "run_param": "def f(tx, label):\n    tx.run(label)\n",
    "closure": "def f(db, user):\n    sql = f'SELECT 1 WHERE u = {user!r}'\n    db.read(lambda c: c.execute(sql))\n",
    "builder_arg": "def _wrap(q):\n    return 'CALL () { ' + q + ' }'\ndef f(conn, x):\n    conn.read(_wrap(x), {})\n",
    "builder_body": "import os\ndef q():\n    return os.environ['Q']\ndef f(conn):\n    conn.read_rows(q(), {})\n",
    "comprehension": "def f(conn, names):\n    conn.read(' UNION '.join(['MATCH (' + n + ')' for n in names]), {})\n",
}
GOOD = (
    "COLS = 's, p'\n"
    "def f(conn, s, p):\n"
    "    where, args = ['user = ?'], [s]\n"
    "    if p is not None:\n"
    "        where.append('p = ?')\n"
    "        args.append(p)\n"
    "    sql = f\"SELECT {COLS} FROM t WHERE {' AND '.join(where)} LIMIT ?\"\n"
    "    conn.read(lambda c: c.execute(sql, args))\n"
    "    for ddl in ('CREATE TABLE a (x)', 'CREATE TABLE b (y)'):\n"
    "        conn.execute(ddl)\n"
    "    conn.execute('CREATE KEYSPACE ' + cql_identifier(s) + ' WITH x')\n"
    "def _wrap(q, *cols):\n"
    "    return 'CALL () { ' + q + ' } RETURN ' + ', '.join(c + ': ' + c for c in cols)\n"
    "QS = {k: _wrap('MATCH (n) RETURN n.' + k, k) for k in ('a', 'b')}\n"
    "def g(conn, k):\n"
    "    conn.read(QS[k], {})\n"
    "    conn.read_rows(_wrap('MATCH (n) RETURN n', 'n'), {})\n"
)


@pytest.mark.parametrize("name", sorted(BAD))
def test_checker_rejects_interpolated_queries(name: str) -> None:
    assert QueryTextChecker(BAD[name]).problems(), name


def test_checker_accepts_constant_fragments() -> None:
    assert QueryTextChecker(GOOD).problems() == []


def test_checker_follows_fragments_imported_from_store_modules(tmp_path: Path) -> None:
    stores = tmp_path / "processors" / "stores"
    stores.mkdir(parents=True)
    (stores / "frags.py").write_text("import os\nGOOD = 'MATCH (d) WHERE ' + 'd.x = $x'\nBAD = os.environ['Q']\n")
    use = "from processors.stores.frags import {0}\ndef f(conn):\n    conn.read({0} + ' RETURN d', {{}})\n"
    assert QueryTextChecker(use.format("GOOD"), tmp_path).problems() == []
    assert QueryTextChecker(use.format("BAD"), tmp_path).problems()
    assert QueryTextChecker(use.format("GOOD")).problems()  # without the repository nothing is assumed


def test_store_code_builds_no_query_text_from_values() -> None:
    root = Path(__file__).resolve().parents[2]
    stores = root / "processors" / "stores"
    files = sorted(stores.rglob("*.py"))
    names = {str(f.relative_to(stores)) for f in files}
    assert {
        "sqlite/triples.py",
        "cassandra/schema.py",
        "neo4j/store.py",
        "neo4j/documents.py",
        "sqlite/documents.py",
    } <= names
    problems = {str(f.relative_to(stores)): QueryTextChecker(f.read_text(), root).problems() for f in files}
    assert {k: v for k, v in problems.items() if v} == {}
