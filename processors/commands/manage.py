"""`kgflow communities build|list`, `kgflow collections list|delete`, `kgflow documents list|delete`:
the lifecycle of what a collection holds, through the flow's services."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import BaseModel

from processors.algorithms.wording import plural
from processors.commands.connect import client
from processors.commands.options import bus_args, store_args

TIMEOUT_S = 3600.0


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the lifecycle commands."""
    com = sub.add_parser("communities", help="a collection's communities").add_subparsers(dest="what", required=True)
    b = com.add_parser("build", help="rebuild the communities of a collection (no model calls)")
    b.add_argument("--update", action="store_true",
                   help="re-cluster only the communities writes touched since the last build")  # fmt: skip
    ls = com.add_parser("list", help="list communities (largest first)")
    ls.add_argument("--level", type=int)
    ls.add_argument("--limit", type=int, default=50)
    col = sub.add_parser("collections", help="collections").add_subparsers(dest="what", required=True)
    cl = col.add_parser("list", help="the user's collections with their counts")
    cd = col.add_parser("delete", help="delete a collection (documents, graph, vectors, communities)")
    cd.add_argument("name")
    doc = sub.add_parser("documents", help="documents of a collection").add_subparsers(dest="what", required=True)
    dl = doc.add_parser("list", help="the collection's documents")
    dl.add_argument("--limit", type=int, default=1000)
    dd = doc.add_parser("delete", help="delete documents (their chunks, mentions and share of relations)")
    dd.add_argument("ids", nargs="+", metavar="ID")
    for p in (b, ls, dl, dd):
        p.add_argument("--collection", "-C", default="default")
    for p in (b, ls, cl, cd, dl, dd):
        p.add_argument("--user", "-U", help="the workspace (default: the --url token's, else default)")
        p.add_argument("--flow", default="default")
        p.add_argument("--url", help="gateway URL (default: run in-process)")
        p.add_argument("--token", help="gateway token (or KGFLOW_GATEWAY_TOKEN)")
        store_args(p)
        bus_args(p)
        p.set_defaults(func=run)


async def run(a: argparse.Namespace) -> int:
    """Run the command through the API and print the answer as JSON; a delete of something that
    does not exist is an error naming it (exit 1), an empty list a list with a note on stderr."""
    async with client(a, TIMEOUT_S) as kg:
        a.user = kg.user  # the token's workspace when --user was not given
        if a.what == "list":
            if a.command == "communities":
                items: list[Any] = await kg.communities(a.collection, a.level, a.limit)
            elif a.command == "collections":
                items = await kg.collections()
            else:
                items = await kg.documents(a.collection, a.limit)
            return _print_list(a, items)
        if a.command == "communities":
            _print(await kg.build_communities(a.collection, update=a.update))
            return 0
        if a.command == "collections":
            deleted = await kg.delete_collection(a.name)
            _print({"deleted": int(deleted)})
            if deleted:
                print(f"deleted collection {a.user}/{a.name}", file=sys.stderr)
                return 0
            names = ", ".join(c.collection for c in await kg.collections()) or "none"
            print(f"kgflow: error: collection {a.name!r} not found (collections of user {a.user!r}: {names})",
                  file=sys.stderr)  # fmt: skip
            return 1
        res = await kg.delete_documents(a.ids, a.collection)
    _print({"deleted": res.deleted, **({"not_found": res.not_found} if res.not_found else {})})
    if res.not_found:
        print(f"kgflow: error: not found in {a.user}/{a.collection}: {', '.join(res.not_found)}", file=sys.stderr)
        return 1
    print(f"deleted {plural(res.deleted, 'document')} from {a.user}/{a.collection}", file=sys.stderr)
    return 0


def _print(out: BaseModel | dict[str, Any]) -> None:
    if isinstance(out, BaseModel):
        out = out.model_dump(exclude_defaults=True, exclude={"schema_version", "end_of_stream"}, mode="json")
    print(json.dumps(out, indent=1, ensure_ascii=False))


def _print_list(a: argparse.Namespace, items: list[Any]) -> int:
    _print({a.command: [i.model_dump(mode="json", exclude_defaults=True) for i in items]})
    if not items:
        where = f"user {a.user!r}" if a.command == "collections" else f"{a.user}/{a.collection}"
        print(f"no {a.command} for {where}", file=sys.stderr)
    return 0
