"""`kgflow load triples`: a file through the flow's triples-store service (in process on the embedded
default, over Pulsar with --pulsar), or into a remote `kgflow up` through its gateway (--url). The
one write path: triples are stored and their labels embedded with the flow's embeddings model, as
every other write does."""

from __future__ import annotations

import argparse
import sys

from tqdm import tqdm

from processors.algorithms.wording import plural
from processors.commands.connect import client


class _Bars:
    """One progress bar per phase: storing triples, then embedding labels."""

    def __init__(self, name: str, disable: bool) -> None:
        self.name, self.disable = name, disable
        self.bar: tqdm | None = None  # type: ignore[type-arg]
        self.phase = ""

    def __call__(self, phase: str, n: int, total: int | None) -> None:
        if phase != self.phase:
            self.close()
            self.phase = phase
            desc, unit = (f"storing {self.name}", "triple") if phase == "store" else ("embedding labels", "label")
            self.bar = tqdm(total=total, unit=unit, desc=desc, disable=self.disable, file=sys.stderr)
        assert self.bar is not None
        self.bar.update(n)

    def close(self) -> None:
        """Close the current bar."""
        if self.bar is not None:
            self.bar.close()


async def load_triples_file(a: argparse.Namespace) -> int:
    """Load a file through flow `a.flow`: stored, labels embedded with the flow's model, recorded
    (through a gateway's import route with --url)."""
    bars = _Bars(a.file.name, a.no_progress)
    try:
        async with client(a) as kg:
            a.user = kg.user  # the token's workspace when --user was not given
            r = await kg.load_triples(a.file, collection=a.collection, format=a.format, progress=bars)
    finally:
        bars.close()
    if r.entities is None:
        print(f"stored {plural(r.triples, 'triple')} into {a.user}/{a.collection} through flow {a.flow!r} at {a.url}",
              file=sys.stderr)  # fmt: skip
        return 0
    print(
        f"loaded {plural(r.triples, 'new triple')} ({plural(r.entities, 'entity')}, {plural(r.relations, 'relation')}, "
        f"{plural(r.embedded, 'label')} embedded) into {a.user}/{a.collection}",
        file=sys.stderr,
    )
    if r.repaired:
        print(f"repaired: {r.repaired}", file=sys.stderr)
    return 0
