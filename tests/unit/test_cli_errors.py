"""What a new user hits first: every failure is one clear line (FILE:LINE where there is one),
settings are named as the user wrote them, and small things work (--version, --log-level, TSV/JSONL
forms, a retrieval-only answer printed once, metrics reachable in compose)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from processors.base.logs import JsonFormatter, TextFormatter, setup_logging
from processors.commands.cli import main
from processors.ingest.triples.readers import read_triples
from schemas.terms import Term

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "examples" / "sample.tsv"
KGFLOW = Path(sys.executable).parent / "kgflow"


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """`kgflow ARGS` in this process: (exit status, stdout, stderr)."""
    try:
        code = main(args)
    except SystemExit as e:  # argparse
        code = int(e.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home with the sample graph in collection `demo`."""
    home = tmp_path_factory.mktemp("cli") / "home"
    assert main(["load", "triples", str(SAMPLE), "--home", str(home), "-C", "demo", "--no-progress"]) == 0
    return home


@pytest.mark.parametrize(
    ("name", "text", "expected"),
    [
        ("bad.nt", "<http://e/a> <http://e/b> <http://e/c> .\n<a> <b> <c> .\n", "bad.nt:2: invalid N-Triples line"),
        ("bad.ttl", "@prefix e: <http://e/> .\ne:a e:b e:c .\ne:a e:b ;; e:c\n", "bad.ttl:3: bad Turtle syntax"),
        ("bad.jsonl", '{"s": "a", "p": "b", "o": "c"}\n{"s": 1}\n', "bad.jsonl:2:"),
        ("bad.tsv", "a\tb\tc\na\t\tc\n", "bad.tsv:2: the relation field is empty"),
    ],
)
def test_malformed_files_are_one_line_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, text: str, expected: str
) -> None:
    path = tmp_path / name
    path.write_text(text)
    code, _, err = run(["load", "triples", str(path), "--home", str(tmp_path / "h"), "--no-progress"], capsys)
    assert code == 2 and expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


def test_a_directory_or_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["load", "triples", str(tmp_path), "--home", str(tmp_path / "h")], capsys)
    assert code == 2 and "is a directory" in err and "Traceback" not in err
    code, _, err = run(["load", "triples", str(tmp_path / "nope.tsv"), "--home", str(tmp_path / "h")], capsys)
    assert code == 2 and "no such file" in err


def test_jsonl_reads_trustgraph_terms(tmp_path: Path) -> None:
    path = tmp_path / "tg.jsonl"
    rows = [
        {"s": {"t": "i", "i": "http://e/a"}, "p": {"t": "i", "i": "http://e/p"}, "o": {"t": "l", "v": "x", "ln": "en"}},
        {"s": {"type": "iri", "value": "http://e/a"}, "p": {"t": "i", "i": "http://e/p"}, "o": {"t": "i", "i": "http://e/b"}},
    ]  # fmt: skip
    path.write_text("\n".join(json.dumps(r) for r in rows))
    found = list(read_triples(path))
    assert [t.o for t in found] == [Term.literal("x", language="en"), Term.iri("http://e/b")]


def test_query_outside_any_home_is_an_error_not_a_fresh_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "elsewhere"
    code, _, err = run(["query", "graph-rag", "who?", "--home", str(home), "--no-llm"], capsys)
    assert code == 2 and "no kgflow data in" in err and not home.exists()


def test_retrieval_only_answer_prints_its_facts_once(loaded: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["query", "graph-rag", "Where was marie_curie's husband born?", "--home", str(loaded),
                          "-C", "demo", "--no-llm"], capsys)  # fmt: skip
    assert code == 0 and out.count("pierre curie | place of birth | paris") == 1, out


def test_settings_are_named_as_written(
    loaded: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = ["query", "graph-rag", "x", "--home", str(loaded), "-C", "demo", "--no-llm"]
    code, _, err = run([*base, "--param", "max-path-length=99"], capsys)
    assert code == 2 and "max-path-length=" in err and "max_path_length" not in err
    code, _, err = run([*base, "--log-level", "LOUD"], capsys)
    assert code == 2 and "invalid choice: 'LOUD'" in err
    monkeypatch.setenv("KGFLOW_CONCURRENCY", "lots")
    code, _, err = run(base, capsys)
    assert code == 2 and "KGFLOW_CONCURRENCY='lots'" in err
    code, _, err = run([*base, "--concurrency", "-"], capsys)
    assert code == 2 and "--concurrency" in err


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["--version"], capsys)
    assert code == 0 and out.startswith("kgflow ")


def test_a_closed_pipe_is_not_a_traceback(loaded: Path, tmp_path: Path) -> None:
    batch = tmp_path / "q.txt"
    batch.write_text("marie curie\n" * 40)
    cmd = f"'{KGFLOW}' query graph-rag --batch '{batch}' --home '{loaded}' -C demo --no-llm --json | head -c 10"
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=300, check=False)
    assert len(proc.stdout) == 10 and "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr


def test_logs_are_readable_on_a_terminal_and_json_when_asked(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        setup_logging("info", "text")
        assert isinstance(logging.getLogger().handlers[0].formatter, TextFormatter)
        setup_logging("info", "json")
        handler = logging.getLogger().handlers[0]
        assert isinstance(handler.formatter, JsonFormatter)
        record = logging.makeLogRecord({"msg": "hello", "levelname": "INFO", "name": "t", "created": 0.0})
        assert json.loads(handler.formatter.format(record))["time"] == "1970-01-01T00:00:00.000+00:00"
    finally:
        setup_logging("warning", "text")


def test_compose_metrics_listen_beyond_the_container_loopback() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    for name, svc in compose["services"].items():
        if "--metrics-port" in svc.get("command", []):
            assert svc["environment"].get("KGFLOW_METRICS_HOST") == "0.0.0.0", name


def test_a_model_that_cannot_answer_keeps_the_facts(
    loaded: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KGFLOW_LLM", "local")
    monkeypatch.setenv("KGFLOW_LLM_MODEL", str(tmp_path / "missing.gguf"))
    code, out, err = run(["query", "graph-rag", "Where was marie_curie's husband born?", "--home", str(loaded),
                          "-C", "demo"], capsys)  # fmt: skip
    assert code == 0 and "pierre curie | place of birth | paris" in out, out
    assert err.count("\n") == 1 and "kgflow: warning: no model answer (llm-config)" in err
    assert "missing.gguf" in err or "llama-cpp-python is not installed" in err  # before the local-llm build


@pytest.mark.parametrize("command", [["load", "documents", "README.md", "--no-progress"], ["query", "drift", "who?"]])
def test_a_flow_nobody_runs_is_named_at_once_not_waited_for(
    loaded: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    code, _, err = run([*command, "--home", str(loaded), "-C", "demo", "--flow", "nope"], capsys)
    assert code != 0 and "no flow 'nope' is running (flows: default)" in err, err


@pytest.mark.parametrize("option", ["--batch-size", "--in-flight"])
def test_load_batching_options_below_one_are_refused(
    loaded: Path, capsys: pytest.CaptureFixture[str], option: str
) -> None:
    code, _, err = run(["load", "documents", "README.md", "--home", str(loaded), option, "0"], capsys)
    assert code == 2 and "kgflow: error: --batch-size and --in-flight must be at least 1" in err, err


def test_run_names_an_unknown_processor_before_starting_any(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["run", "embeddings", "no-such-processor"], capsys)
    assert code == 2 and "unknown processor 'no-such-processor'" in err and "ready" not in err, err
