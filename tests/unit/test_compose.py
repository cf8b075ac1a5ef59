"""docker-compose.yml refers only to things that exist: processors, CLI options, settings, files."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from processors.base.settings import RuntimeSettings
from processors.commands.catalog import PROCESSORS
from processors.commands.cli import build_parser
from processors.stores.settings import StoreSettings

ROOT = Path(__file__).resolve().parent.parent.parent
COMPOSE = ROOT / "docker-compose.yml"
SERVER_IMAGES = {"pulsar": "apachepulsar/pulsar:4.0.", "cassandra": "cassandra:5", "neo4j": "neo4j:5.26"}


def compose() -> dict[str, Any]:
    """The parsed compose file (YAML anchors and merge keys resolved)."""
    return yaml.safe_load(COMPOSE.read_text())


def kgflow_services() -> dict[str, dict[str, Any]]:
    """Services built from the repo (the kgflow image)."""
    return {name: svc for name, svc in compose()["services"].items() if "build" in svc}


def kgflow_commands(svc: dict[str, Any]) -> list[list[str]]:
    """Every `kgflow ...` invocation of a service (direct, or inside `sh -c`)."""
    cmd = svc["command"]
    argv = shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]
    if argv[:2] == ["sh", "-c"]:
        script = argv[2]
        return [shlex.split(part) for part in re.split(r"&&|\|\||;|\||\(|\)", script) if part.split()[:1] == ["kgflow"]]
    return [argv]


def known_env_names() -> set[str]:
    """KGFLOW_* names that some part of kgflow reads."""
    names = {f"KGFLOW_{f.upper()}" for m in (StoreSettings, RuntimeSettings) for f in m.model_fields}
    from processors.gateway.service import GatewaySettings

    names |= {f"KGFLOW_GATEWAY_{f.upper()}" for f in GatewaySettings.model_fields}
    for src in (ROOT / "processors").rglob("*.py"):  # names read directly (e.g. KGFLOW_LLM_MODEL)
        names |= set(re.findall(r"[\"'](KGFLOW_[A-Z0-9_]+)[\"']", src.read_text()))
    return names


def test_servers_are_the_supported_versions() -> None:
    services = compose()["services"]
    for name, prefix in SERVER_IMAGES.items():
        assert services[name]["image"].startswith(prefix), services[name]["image"]
        assert "healthcheck" in services[name]


def test_every_processor_and_the_gateway_have_a_service() -> None:
    ran = {cmd[2] for svc in kgflow_services().values() for cmd in kgflow_commands(svc) if cmd[1] == "run"}
    assert ran == set(PROCESSORS)


@pytest.mark.parametrize("service", sorted(kgflow_services()))
def test_commands_parse_with_the_real_cli(service: str) -> None:
    svc = kgflow_services()[service]
    commands = kgflow_commands(svc)
    assert commands, f"{service} runs no kgflow command"
    for argv in commands:
        assert argv[0] == "kgflow"
        try:
            args = build_parser().parse_args(argv[1:])
        except SystemExit as e:  # argparse rejects unknown commands and options
            pytest.fail(f"{service}: `{shlex.join(argv)}` does not parse ({e})")
        if args.command == "run":
            assert all(p in PROCESSORS for p in args.processor), argv
        for value in vars(args).values():
            if isinstance(value, Path):  # files the command reads exist in the image (built from the repo)
                assert (ROOT / value).exists(), f"{service}: {value} is not in the repo"


@pytest.mark.parametrize("service", sorted(kgflow_services()))
def test_environment_names_real_settings(service: str) -> None:
    env = kgflow_services()[service].get("environment", {})
    assert isinstance(env, dict)
    unknown = {k for k in env if k.startswith("KGFLOW_")} - known_env_names()
    assert not unknown, f"{service}: unknown settings {sorted(unknown)}"
    # And every value a typed setting can hold (interpolations like ${X:-} are the user's).
    fixed = {k[len("KGFLOW_") :].lower(): v for k, v in env.items() if "${" not in str(v) and v != ""}
    for model in (StoreSettings, RuntimeSettings):
        model.model_validate({k: v for k, v in fixed.items() if k in model.model_fields})


def test_env_check_rejects_unknown_names() -> None:
    assert "KGFLOW_TRIPLES_BACKEND" in known_env_names()
    assert "KGFLOW_TRIPLE_BACKEND" not in known_env_names()


def test_build_files_exist() -> None:
    builds = {
        (svc["build"]["context"], svc["build"].get("dockerfile", "Dockerfile")) for svc in kgflow_services().values()
    }
    assert len(builds) == 1
    context, dockerfile = builds.pop()
    dockerfile_path = ROOT / context / dockerfile
    assert dockerfile_path.is_file()
    for line in dockerfile_path.read_text().splitlines():
        if line.startswith("COPY "):
            *sources, _dest = shlex.split(line)[1:]
            for src in sources:
                optional = any(c in src for c in "*?[")
                assert optional or (ROOT / context / src).exists(), f"Dockerfile copies missing {src}"


def test_flow_init_starts_the_shipped_blueprint() -> None:
    cmds = kgflow_commands(compose()["services"]["flow-init"])
    put = next(c for c in cmds if c[1:3] == ["flow", "put-blueprint"])
    start = next(c for c in cmds if c[1:3] == ["flow", "start"])
    blueprint = yaml.safe_load((ROOT / put[3]).read_text())
    assert start[start.index("--blueprint") + 1] == blueprint["name"]


def test_dependencies_and_volumes_are_declared() -> None:
    doc = compose()
    services = doc["services"]
    for name, svc in services.items():
        for dep in svc.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"
        for vol in svc.get("volumes", []):
            source = vol.split(":", 1)[0]
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"
            else:
                assert source in doc["volumes"], f"{name} uses undeclared volume {source}"
