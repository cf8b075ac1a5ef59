"""The explorer: kgflow's web page, served by the gateway at `/` from files built at build time.

The page (sources in `web/`, bundled by `make web` into `static/`, which is committed and shipped in
the Python package) is code and holds no data, so it loads without a token; everything it shows
comes from the same socket and REST API as any client's, with the token the page asks for when the
gateway answers 401 (it lists the flows over REST first; an open gateway on loopback needs none).
The few built files (about 0.5 MB) are read once when the routes are added and answered from
memory, so serving them never touches the disk from the event loop; only the names the build
writes are served: the route never maps a client's path onto the file system.
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
CONTENT_TYPES = {INDEX: "text/html; charset=utf-8", **ASSETS}
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


class Explorer:
    """The built files, read once; a file missing from the build answers 404 saying how to rebuild it."""

    def __init__(self, folder: Path = STATIC) -> None:
        self.files = {name: (folder / name).read_bytes() for name in CONTENT_TYPES if (folder / name).is_file()}

    def _file(self, name: str) -> web.Response:
        body = self.files.get(name)
        if body is None:  # a source checkout whose bundle was deleted
            return web.Response(status=404, text=f"the explorer's {name} is missing: run `make web`")
        return web.Response(body=body, headers={**SECURITY_HEADERS, "Content-Type": CONTENT_TYPES[name]})

    async def index(self, request: web.Request) -> web.Response:
        """`GET /`: the page."""
        return self._file(INDEX)

    async def asset(self, request: web.Request) -> web.Response:
        """`GET /static/{name}`: one file of the build."""
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound(text=f"no explorer file {name!r}")
        return self._file(name)


def add_routes(app: web.Application, folder: Path = STATIC) -> None:
    """Register `/` and `/static/{name}` (reads the built files now, at startup)."""
    explorer = Explorer(folder)
    app.router.add_get("/", explorer.index)
    app.router.add_get("/index.html", explorer.index)  # where TrustGraph's status check looks for a UI
    app.router.add_get("/static/{name}", explorer.asset)
