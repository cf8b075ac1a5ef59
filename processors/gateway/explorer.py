"""The explorer: kgflow's web page, served by the gateway at `/` from files built at build time.

The page (sources in `web/`, bundled by `make web` into `static/`, which is committed and shipped in
the Python package) is code and holds no data, so it loads without a token; everything it shows
comes from the same socket and REST API as any client's, with the token the page asks for when
the gateway has tokens (`/api/v1/health` tells it: with tokens configured and no valid token it
names no flows). Files are read with aiohttp's FileResponse (sent off the event loop), and only the
names built into `static/` are served: the route never maps a client's path onto the file system.
"""

from __future__ import annotations

from pathlib import Path

from aiohttp import web

STATIC = Path(__file__).resolve().parent / "static"
INDEX = "index.html"
# The files of the build (web/build.mjs writes exactly these); anything else is a 404.
ASSETS = {
    "explorer.js": "text/javascript; charset=utf-8",
    "explorer.css": "text/css; charset=utf-8",
}
# Scripts and styles only from the gateway itself, data only over its own HTTP and websocket
# (no CDN: machines may be offline, and nothing else should see what a user asks); never framed,
# so a page that asks for a token cannot be overlaid by another site.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
        "connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cache-Control": "no-cache",
}


def _file(name: str, content_type: str) -> web.StreamResponse:
    path = STATIC / name
    if not path.is_file():  # a source checkout whose bundle was deleted: say how to rebuild it
        return web.Response(status=404, text=f"the explorer's {name} is missing: run `make web`")
    return web.FileResponse(path, headers={**SECURITY_HEADERS, "Content-Type": content_type})


async def index(request: web.Request) -> web.StreamResponse:
    """`GET /`: the page."""
    return _file(INDEX, "text/html; charset=utf-8")


async def asset(request: web.Request) -> web.StreamResponse:
    """`GET /static/{name}`: one file of the build."""
    name = request.match_info["name"]
    content_type = ASSETS.get(name)
    if content_type is None:
        raise web.HTTPNotFound(text=f"no explorer file {name!r}")
    return _file(name, content_type)


def add_routes(app: web.Application) -> None:
    """Register `/` and `/static/{name}`."""
    app.router.add_get("/", index)
    app.router.add_get("/static/{name}", asset)
