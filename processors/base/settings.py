"""Typed process settings (environment: KGFLOW_<FIELD>).

Every default is written once: a process setting here, a flow parameter in its service's
parameter model (e.g. `GraphRagSettings`, `LabelParams`, `LLMParams`), a gateway setting in
`GatewaySettings`. Constructors take these objects instead of repeating their defaults.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError, field_validator

M = TypeVar("M", bound=BaseModel)
# Each processor's flow-parameter model, by processor name (None: it takes none).
ParamModels = Mapping[str, type[BaseModel] | None]
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


class RuntimeSettings(BaseModel):
    """How a processor process talks to the bus and reports."""

    bus: Literal["memory", "pulsar"] = "memory"
    pulsar_url: str = "pulsar://127.0.0.1:6650"
    concurrency: int = Field(default=16, ge=1)  # requests in flight per processor
    bulk_concurrency: int = Field(default=2, ge=1)  # bulk requests (ServiceSpec.bulk_bytes) in flight, apart
    request_timeout_s: float = 60.0
    handler_timeout_s: float = 300.0  # a handler running longer is abandoned (error response, acked)
    drain_timeout_s: float = 10.0  # stopping a flow waits this long for its in-flight handlers
    max_redeliveries: int = 3
    # numpy's BLAS threads: its idle workers spin between calls, so on a small machine each extra
    # thread takes a core from the handlers (measured: half the CPU of a graph-rag question)
    blas_threads: int = Field(default=1, ge=1)
    # worker processes that index documents (processors/base/offload.py); 0: a thread of this process
    indexing_processes: int = Field(default=1, ge=0)
    # niceness added to batch work (those workers, the bulk embedding lane): a question's CPU comes first
    indexing_nice: int = Field(default=10, ge=0, le=19)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"  # 0.0.0.0 inside containers, so Prometheus can scrape
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "WARNING"
    log_format: Literal["auto", "text", "json"] = "auto"  # auto: text on a terminal, JSON lines otherwise

    @field_validator("log_level", mode="before")
    @classmethod
    def _upper(cls, v: object) -> object:
        return v.upper() if isinstance(v, str) else v


def setting_name(field: str, prefix: str = "KGFLOW_", from_cli: bool = False) -> str:
    """How the user wrote a setting: `--concurrency` on the command line, else `KGFLOW_CONCURRENCY`."""
    return f"--{field.replace('_', '-')}" if from_cli else prefix + field.upper()


def describe_errors(
    exc: ValidationError, name: Callable[[str], str] = lambda f: f.replace("_", "-"), limit: int = 3
) -> str:
    """A one-line account of a validation error, each field named by `name(field)`."""
    parts = []
    for err in exc.errors()[:limit]:
        field = str(err["loc"][0]) if err["loc"] else ""
        value = err.get("input")
        shown = f"={value!r}" if field and not isinstance(value, dict) else ""
        parts.append(f"{name(field) if field else '<root>'}{shown}: {err['msg']}")
    return "; ".join(parts)


def from_env(model: type[M], overrides: dict[str, Any] | None = None, prefix: str = "KGFLOW_") -> M:
    """Build `model` from KGFLOW_<FIELD> environment variables, then explicit overrides (command-line
    options). An invalid value is a ValueError naming the setting as the user wrote it."""
    data: dict[str, Any] = {}
    for name in model.model_fields:
        env = os.environ.get(prefix + name.upper())
        if env is not None and env != "":
            data[name] = env
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    data.update(given)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        message = describe_errors(e, lambda f: setting_name(f, prefix, from_cli=f in given))
        raise ValueError(f"invalid setting {message}") from None


def flow_params(model: type[M], parameters: dict[str, Any]) -> M:
    """A processor's typed view of its flow parameters (kebab-case names accepted; others ignored).

    An invalid value is a ValueError naming the parameter as a flow writes it (`max-path-length`).
    """
    norm = {k.replace("-", "_"): v for k, v in parameters.items()}
    try:
        return model.model_validate({k: v for k, v in norm.items() if k in model.model_fields})
    except ValidationError as e:
        raise ValueError(f"invalid flow parameter {describe_errors(e)}") from None


def param_names(model: type[BaseModel]) -> list[str]:
    """A parameter model's field names as flows write them (kebab-case)."""
    return [f.replace("_", "-") for f in model.model_fields]
