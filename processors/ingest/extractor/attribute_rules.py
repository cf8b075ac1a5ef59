"""spaCy's attribute ruler (the part of the English pipeline that sets each token's coarse part of
speech from its tag, word and dependency label), matched with the same result at a fraction of
the cost.

The ruler runs its ~180 rules through spaCy's `Matcher`: a seventh of extraction's CPU. Every one
of them is a fixed run of one or two tokens, each tested on its tag, lowercase form, dependency
label or being whitespace, by a value, a set of values (IN, NOT_IN) or a regular expression. Here
each rule is filed under a value its first token must have (so a token looks up the few rules it
can start) and checked in full only then. The matches, in the ruler's order (rule number, then
position), are applied by the ruler itself, as before. A rule of any other form keeps the stock
matcher for the whole pipeline.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # spaCy is loaded with the pipeline, not at import
    from spacy.language import Language
    from spacy.pipeline import AttributeRuler
    from spacy.strings import StringStore
    from spacy.tokens import Doc

Match = tuple[int, int, int, int]  # (rule number, match id, start, end): what AttributeRuler.match returns
FIELDS = ("TAG", "LOWER", "DEP", "IS_SPACE")  # what a rule's token may test, in `Doc.to_array` order
INDEXED = ("LOWER", "TAG", "DEP", "IS_SPACE")  # which tested field files a rule, first that can
Row = Sequence[int]  # one token's FIELDS: string hashes (TAG, LOWER, DEP), then 0 or 1
Test = Callable[[Sequence[Row], int], bool]
FieldTest = Callable[[Row], bool]


class UnsupportedRule(ValueError):
    """A rule this index cannot express (the stock matcher is kept)."""


def _field_test(strings: StringStore, field: int, spec: Any) -> tuple[FieldTest, set[int] | None]:
    """A test of one token field, and the values it admits when it names them (None: any may)."""
    if isinstance(spec, bool) or isinstance(spec, str):
        value = int(spec) if isinstance(spec, bool) else strings.add(spec)
        return (lambda row: row[field] == value), {value}
    if isinstance(spec, dict) and len(spec) == 1:
        ((op, arg),) = spec.items()
        if op == "IN":
            values = {strings.add(v) for v in arg}
            return (lambda row: row[field] in values), values
        if op == "NOT_IN":
            excluded = {strings.add(v) for v in arg}
            return (lambda row: row[field] not in excluded), None
        if op == "REGEX" and field != FIELDS.index("IS_SPACE"):
            pattern = re.compile(arg)
            return (lambda row: pattern.search(strings[row[field]]) is not None), None
    raise UnsupportedRule(f"{spec!r}")


def _token_test(strings: StringStore, token: dict[str, Any]) -> tuple[FieldTest, tuple[int, set[int]] | None]:
    """A test of one pattern token, and (field, values) one of its fields must take, if any."""
    if not token or not set(token) <= set(FIELDS):
        raise UnsupportedRule(f"{token!r}")
    tests, named = [], {}
    for name, spec in token.items():
        test, values = _field_test(strings, FIELDS.index(name), spec)
        tests.append(test)
        if values is not None:
            named[name] = values
    key = next(((FIELDS.index(n), named[n]) for n in INDEXED if n in named), None)
    return (lambda row: all(t(row) for t in tests)), key


class IndexedRules:
    """The ruler's `match`, its rules filed by a value their first token must have."""

    def __init__(self, ruler: AttributeRuler) -> None:
        strings = ruler.vocab.strings
        self.filed: dict[tuple[int, int], list[tuple[int, int, int, Test | None]]] = {}
        self.unfiled: list[tuple[int, int, int, Test | None]] = []  # rules every token may start
        for n in range(len(ruler.attrs)):
            match_id = strings[str(n)]
            for pattern in ruler.matcher.get(str(n))[1]:
                tests = [_token_test(strings, token) for token in pattern]
                first = tests[0][1]
                # one token testing one field by value(s): filed under them, it needs no test
                implied = len(pattern) == 1 and len(pattern[0]) == 1 and first is not None
                rule = (n, match_id, len(pattern), None if implied else self._run_test([t for t, _ in tests]))
                if first is None:
                    self.unfiled.append(rule)
                    continue
                field, values = first
                for value in values:
                    self.filed.setdefault((field, value), []).append(rule)

    @staticmethod
    def _run_test(tests: list[FieldTest]) -> Test:
        """Whether the rows from `at` on pass `tests`, one token each."""
        return lambda rows, at: at + len(tests) <= len(rows) and all(t(rows[at + k]) for k, t in enumerate(tests))

    def __call__(self, doc: Doc) -> list[Match]:
        """The matches AttributeRuler.match finds, in its order."""
        from spacy.attrs import DEP, IS_SPACE, LOWER, TAG

        rows = doc.to_array([TAG, LOWER, DEP, IS_SPACE]).tolist()
        found: set[Match] = set()
        for at, row in enumerate(rows):
            candidates = [r for field, value in enumerate(row) for r in self.filed.get((field, value), ())]
            for n, match_id, length, test in candidates + self.unfiled:
                if test is None or test(rows, at):
                    found.add((n, match_id, at, at + length))
        return sorted(found)


def index_attribute_rules(nlp: Language) -> bool:
    """Give the pipeline's attribute ruler the indexed `match`; False (the stock one kept) when it
    has none or a rule the index cannot express."""
    if "attribute_ruler" not in nlp.pipe_names:
        return False
    ruler = nlp.get_pipe("attribute_ruler")
    try:
        ruler.match = IndexedRules(ruler)  # type: ignore[method-assign]
    except UnsupportedRule:
        return False
    return True
