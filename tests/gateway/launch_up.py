"""`kgflow up`, with the gateway's in-process triples writer wired in (for `tg-load-turtle`).

Until processors/runtime.py passes `loader=embedded_loader(self)` to the gateway on the embedded
stores, this launcher adds it; once the runtime does, it changes nothing.
"""

from __future__ import annotations

import sys

from processors.cli import main
from processors.gateway.service import embedded_loader
from processors.runtime import System

_build = System.build


def _build_with_loader(self: System, name: str):  # type: ignore[no-untyped-def]
    proc = _build(self, name)
    if name == "gateway" and getattr(proc, "loader", None) is None and self.runtime.bus == "memory":
        proc.loader = embedded_loader(self)
    return proc


System.build = _build_with_loader  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
