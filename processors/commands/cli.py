"""The `kgflow` command: parses arguments, then calls services or clients."""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import json
import os
import sys
from pathlib import Path
from typing import NoReturn

from processors.base.logs import setup_logging
from processors.commands import flows as flow_cmds
from processors.commands import load as load_cmds
from processors.commands import load_documents as load_documents_cmd
from processors.commands import manage as manage_cmds
from processors.commands import query as query_cmds
from processors.commands import serve as serve_cmds
from processors.commands.loading import Batching
from processors.commands.options import bus_args, runtime_settings, store_args
from processors.ingest.documents.files import DOCUMENT_FORMATS


def _version() -> str:
    try:
        return importlib.metadata.version("kgflow")
    except importlib.metadata.PackageNotFoundError:  # a source tree that was never installed
        return "(not installed)"


def _gateway_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", help="gateway URL of a running `kgflow up` (default: run in-process)")
    p.add_argument("--token", help="gateway token (or KGFLOW_GATEWAY_TOKEN)")


def _query_parser(q: argparse.ArgumentParser, service: str) -> None:
    q.add_argument("question", nargs="?")
    q.add_argument("--batch", type=Path, help="one question per line (text before a TAB); JSON lines out")
    q.add_argument("--collection", "-C", default="default")
    q.add_argument("--user", "-U", help="the workspace (default: the --url token's, else default)")
    q.add_argument("--flow", default="default")
    q.add_argument("--json", action="store_true", help="print the full response as JSON")
    q.add_argument("--no-llm", action="store_true", help="retrieval only, no language model")
    q.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="request parameter by gateway name, e.g. "
        + {"graph-rag": "max-subgraph-size=150", "drift": "passes=2"}.get(service, "max-hops=2"),
    )
    q.add_argument("--scope-document", action="append", metavar="ID", help="only these documents (repeatable)")
    q.add_argument("--scope", action="append", metavar="KEY=VALUE", help="only documents with this metadata")
    if service == "lazy-rag":
        q.add_argument("--operation", choices=["query", "expand"], default="query", help="expand: retrieval only")
    if service == "kg-query":
        q.add_argument(
            "--mode", choices=["local", "global", "hybrid", "mix", "naive"], help="default: the flow's (mix)"
        )
    _gateway_args(q)
    q.add_argument(
        "--parallel",
        type=int,
        help="questions in flight with --batch (default: 4 through --url or --pulsar, 1 in this process)",
    )
    store_args(q)
    bus_args(q)
    q.set_defaults(func=query_cmds.run_query)


def build_parser() -> argparse.ArgumentParser:
    """The whole command tree."""
    ap = argparse.ArgumentParser(prog="kgflow", description="Graph retrieval over knowledge graphs.")
    ap.add_argument("--version", action="version", version=f"kgflow {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)

    load = sub.add_parser("load", help="load data").add_subparsers(dest="what", required=True)
    lt = load.add_parser("triples", help="load triples from a file (nt, ttl, tsv, jsonl) through a flow")
    lt.add_argument("file", type=Path)
    lt.add_argument("--collection", "-C", default="default")
    lt.add_argument("--user", "-U", help="the workspace (default: the --url token's, else default)")
    lt.add_argument("--flow", default="default", help="the flow whose triples-store and embeddings load it")
    lt.add_argument("--format", choices=["nt", "ttl", "tsv", "jsonl"])
    lt.add_argument("--no-progress", action="store_true")
    _gateway_args(lt)
    store_args(lt)
    bus_args(lt)
    lt.set_defaults(func=load_cmds.load_triples_file)

    ld = load.add_parser(
        "documents",
        help="load documents (JSONL, text, markdown, PDF, DOCX, PPTX, HTML files or directories) "
        "through the documents flow",
    )
    ld.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    ld.add_argument("--collection", "-C", default="default")
    ld.add_argument("--user", "-U", help="the workspace (default: the --url token's, else default)")
    ld.add_argument("--flow", default="default")
    ld.add_argument("--format", choices=list(DOCUMENT_FORMATS), default="auto", help="auto: by file extension")
    ld.add_argument("--no-progress", action="store_true")
    ld.add_argument("--batch-size", type=int, default=Batching.documents, metavar="N",
                    help=f"documents per request (default {Batching.documents})")  # fmt: skip
    ld.add_argument("--in-flight", type=int, default=Batching.in_flight, metavar="N",
                    help=f"batches embedded and parsed at once, one more being stored (default "
                    f"{Batching.in_flight}; over Pulsar, about 2 per document-load instance)")  # fmt: skip
    _gateway_args(ld)
    store_args(ld)
    bus_args(ld)
    ld.set_defaults(func=load_documents_cmd.load_documents)

    query = sub.add_parser("query", help="ask questions").add_subparsers(dest="what", required=True)
    for name, text in (
        ("graph-rag", "answer a question with GraphRAG over the collection's triples"),
        ("lazy-rag", "answer a question from the collection's documents (graph-aware retrieval, lazy summary)"),
        ("kg-query", "LightRAG-style modes (local, global, hybrid, mix, naive) with token budgets"),
        ("drift", "DRIFT search: a primer over communities, ranked follow-ups, key facts with citations"),
    ):
        _query_parser(query.add_parser(name, help=text), name)

    up = sub.add_parser("up", help="run every processor (and the gateway) and start flow `default`")
    up.add_argument("--gateway-port", type=int, help="gateway port (default: KGFLOW_GATEWAY_PORT or 8888)")
    up.add_argument("--no-gateway", action="store_true")
    store_args(up)
    bus_args(up)
    up.set_defaults(func=serve_cmds.up)

    run = sub.add_parser("run", help="run one processor, or several in one process (distributed mode)")
    run.add_argument("processor", nargs="+", metavar="PROCESSOR")
    run.add_argument("--gateway-port", type=int, help="gateway port, when PROCESSOR is the gateway")
    store_args(run)
    bus_args(run)
    run.set_defaults(func=serve_cmds.run)

    mcp = sub.add_parser("mcp", help="serve kgflow's MCP tools on stdio (for Claude Desktop, Cursor, agents)")
    mcp.add_argument("--user", "-U", help="the workspace the tools act in (default: the --url token's, else default)")
    mcp.add_argument("--flow", default="default")
    _gateway_args(mcp)
    store_args(mcp)
    bus_args(mcp)
    mcp.set_defaults(func=_serve_mcp)

    flow_cmds.add_parser(sub)
    manage_cmds.add_parsers(sub)
    return ap


async def _serve_mcp(a: argparse.Namespace) -> int:
    from processors.commands.mcp_stdio import serve  # the MCP SDK is imported only by this command

    return await serve(a)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `kgflow` console script: every failure is one clear line on stderr."""
    args = build_parser().parse_args(argv)
    try:
        if hasattr(args, "log_level"):
            rt = runtime_settings(args)
            setup_logging(rt.log_level, rt.log_format)
        return asyncio.run(args.func(args)) or 0
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `kgflow query ... | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (ValueError, OSError, RuntimeError) as e:
        print(
            json.dumps({"error": {"type": type(e).__name__, "message": str(e)}})
            if getattr(args, "json", False)
            else f"kgflow: error: {_one_line(e)}",
            file=sys.stderr,
        )
        return 2


def _one_line(e: BaseException) -> str:
    """An error for a person: OS errors as `strerror: filename`, others as their message."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.filename}: {e.strerror}" if e.filename else e.strerror
    return str(e)


def run() -> None:
    """The `kgflow` console script: `main`, then `exit_process`."""
    exit_process(main())


def exit_process(code: int) -> NoReturn:
    """Exit with `code`. After Pulsar was used, exit at once: the Pulsar C++ client can abort in
    its destructors at interpreter exit (`terminate called without an active exception`, status
    -6) although the work is done and the bus was closed."""
    if "processors.base.pulsar_bus" in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    run()
