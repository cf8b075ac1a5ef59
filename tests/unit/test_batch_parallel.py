"""`kgflow query --batch` keeps one question in flight in this process (four overlapping questions
took as long in all and made each 4x slower: its reported latency was the queue's) and four when
the services answer elsewhere (a gateway, Pulsar), unless --parallel says otherwise."""

from __future__ import annotations

import pytest

from processors.commands.cli import build_parser
from processors.commands.query import REMOTE_IN_FLIGHT, batch_parallel


def _args(*extra: str) -> object:
    return build_parser().parse_args(["query", "lazy-rag", "--batch", "q.txt", *extra])


def test_in_process_batches_ask_one_question_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KGFLOW_BUS", raising=False)
    assert batch_parallel(_args()) == 1


@pytest.mark.parametrize("remote", [["--url", "http://127.0.0.1:8888"], ["--pulsar", "pulsar://127.0.0.1:6650"]])
def test_remote_batches_keep_several_in_flight(remote: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KGFLOW_BUS", raising=False)
    assert batch_parallel(_args(*remote)) == REMOTE_IN_FLIGHT == 4


def test_the_bus_named_by_the_environment_counts_as_remote(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KGFLOW_BUS", "pulsar")
    assert batch_parallel(_args()) == REMOTE_IN_FLIGHT


@pytest.mark.parametrize("asked", ["1", "3", "8"])
def test_an_explicit_parallel_wins(asked: str) -> None:
    assert batch_parallel(_args("--parallel", asked)) == int(asked)
    assert batch_parallel(_args("--parallel", asked, "--url", "http://127.0.0.1:8888")) == int(asked)
