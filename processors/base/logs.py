"""Logging for every processor: readable lines on a terminal, JSON lines for log collectors."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO 8601, UTC), level, logger, message and any `extra` fields."""

    _skip = set(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        out = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        out.update({k: v for k, v in vars(record).items() if k not in self._skip})
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


class TextFormatter(logging.Formatter):
    """`2026-11-23 10:15:02 WARNING logger: message key=value ...` (the `extra` fields appended)."""

    _skip = JsonFormatter._skip

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%d %H:%M:%S")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        line = super().formatMessage(record)
        extra = " ".join(f"{k}={v}" for k, v in vars(record).items() if k not in self._skip)
        return f"{line} {extra}" if extra else line


def setup_logging(level: str = "WARNING", fmt: str = "auto") -> None:
    """Configure the root logger once, to stderr: `text`, `json`, or `auto` (text on a terminal)."""
    handler = logging.StreamHandler(sys.stderr)
    as_json = fmt == "json" or (fmt == "auto" and not sys.stderr.isatty())
    handler.setFormatter(JsonFormatter() if as_json else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
