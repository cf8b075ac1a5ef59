"""`kgflow communities build|list`, `kgflow collections list|delete`, `kgflow documents list|delete`:
the lifecycle of what a collection holds, through the flow's services."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from pydantic import BaseModel

from processors.commands.connect import flow_bus, service_client
from processors.commands.options import bus_args, store_args
from schemas.communities import BuildCommunities, ListCommunities
from schemas.documents import DeleteCollection, DeleteDocuments, ListCollections, ListDocuments
from schemas.services import COMMUNITIES, COMMUNITY_BUILD, DOCUMENT_STORE, DOCUMENTS, Service

TIMEOUT_S = 3600.0


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register the lifecycle commands."""
    com = sub.add_parser("communities", help="a collection's communities").add_subparsers(dest="what", required=True)
    b = com.add_parser("build", help="rebuild the communities of a collection (no model calls)")
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
        p.add_argument("--user", "-U", default="default")
        p.add_argument("--flow", default="default")
        store_args(p)
        bus_args(p)
        p.set_defaults(func=run)


def _request(a: argparse.Namespace) -> tuple[Service, BaseModel]:
    scope: dict[str, Any] = {"user": a.user}
    if a.command == "communities":
        scope["collection"] = a.collection
        if a.what == "build":
            return COMMUNITY_BUILD, BuildCommunities(**scope)
        return COMMUNITIES, ListCommunities(**scope, level=a.level, limit=a.limit)
    if a.command == "collections":
        if a.what == "list":
            return DOCUMENTS, ListCollections(**scope)
        return DOCUMENT_STORE, DeleteCollection(**scope, collection=a.name)
    scope["collection"] = a.collection
    if a.what == "list":
        return DOCUMENTS, ListDocuments(**scope, limit=a.limit)
    return DOCUMENT_STORE, DeleteDocuments(**scope, document_ids=a.ids)


async def run(a: argparse.Namespace) -> int:
    """Send the command's request and print the answer as JSON."""
    service, req = _request(a)
    async with flow_bus(a) as bus, service_client(bus, service, a.flow, TIMEOUT_S) as client:
        res = await client.request(req)
    out = res.model_dump(exclude_defaults=True, exclude={"schema_version", "end_of_stream"}, mode="json")
    print(json.dumps(out or {"ok": True}, indent=1, ensure_ascii=False))
    if a.command == "collections" and a.what == "delete":
        print(f"deleted collection {a.user}/{a.name}", file=sys.stderr)
    return 0
