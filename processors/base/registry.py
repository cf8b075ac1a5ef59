"""What a processor registry holds: each processor's name, its class, the flow services it serves
and the model of its flow parameters. The table itself lives at the wiring level
(`processors.commands.catalog`), which imports every processor; the framework only reads entries.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel

from processors.base.bus import Bus
from processors.base.settings import ParamModels, RuntimeSettings
from schemas.prompts import Prompts
from schemas.services import AnyService


class Host(Protocol):
    """What processors are built from: the bus, the process settings, the process's home folder and
    the tables the wiring collects from the services. The framework knows no stores: a host that
    holds them is a `processors.services.store_processor.StoreHost` too."""

    bus: Bus
    runtime: RuntimeSettings

    @property
    def home(self) -> Path:
        """The folder the process keeps its state in (flows, stores, gateway secrets)."""
        ...

    @property
    def param_models(self) -> ParamModels:
        """Each processor's flow-parameter model (the config service checks a flow's against them)."""
        ...

    @property
    def prompts(self) -> Prompts:
        """The services' own prompts by id (the gateway shows them)."""
        ...


class Runnable(Protocol):
    """A started processor: the system starts and stops it."""

    async def start(self) -> None:
        """Begin serving."""
        ...

    async def stop(self) -> None:
        """Stop serving."""
        ...


class Buildable(Protocol):
    """A processor class: built from the running system."""

    name: str

    @classmethod
    def create(cls, host: Host) -> Runnable:
        """The processor, built from the host's bus, settings and (lazily) stores."""
        ...


@dataclass(frozen=True)
class ProcessorEntry:
    """A processor: its name, its class, the flow services it serves and its flow-parameter model."""

    name: str
    cls: type[Buildable]
    serves: tuple[AnyService, ...] = ()
    params: type[BaseModel] | None = None

    def build(self, host: Host) -> Runnable:
        """The processor, built on `host`."""
        return self.cls.create(host)
