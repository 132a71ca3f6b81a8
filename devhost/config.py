"""The host's configuration: ``local.settings.json`` and ``host.json``."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping


def parse_timespan(value: str | int | float | None, default: float) -> float:
    """``hh:mm:ss[.fff]`` (or ``d.hh:mm:ss``) as seconds, the way host.json writes durations."""
    if value is None:
        return default
    if isinstance(value, (int, float)):
        return float(value)
    match = re.fullmatch(r"(?:(\d+)\.)?(\d{1,2}):(\d{2}):(\d{2}(?:\.\d+)?)", value.strip())
    if not match:
        raise ValueError(f"not a time span: {value!r}")
    days, hours, minutes, seconds = match.groups()
    return int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)


@dataclass(frozen=True)
class QueueOptions:
    max_polling_interval: float = 60.0
    visibility_timeout: float = 0.0
    batch_size: int = 16
    max_dequeue_count: int = 5
    message_encoding: str = "base64"


@dataclass(frozen=True)
class HostJson:
    route_prefix: str = "api"
    queues: QueueOptions = field(default_factory=QueueOptions)
    durable_task: dict[str, Any] = field(default_factory=dict)
    function_timeout: float = 300.0

    @classmethod
    def load(cls, app_dir: Path) -> HostJson:
        path = app_dir / "host.json"
        document = apply_host_overrides(json.loads(path.read_text()) if path.exists() else {}, os.environ)
        extensions = document.get("extensions", {})
        queues = extensions.get("queues", {})
        return cls(
            route_prefix=extensions.get("http", {}).get("routePrefix", "api"),
            queues=QueueOptions(
                max_polling_interval=parse_timespan(queues.get("maxPollingInterval"), 60.0),
                visibility_timeout=parse_timespan(queues.get("visibilityTimeout"), 0.0),
                batch_size=int(queues.get("batchSize", 16)),
                max_dequeue_count=int(queues.get("maxDequeueCount", 5)),
                message_encoding=str(queues.get("messageEncoding", "base64")).lower(),
            ),
            durable_task=extensions.get("durableTask", {}),
            function_timeout=parse_timespan(document.get("functionTimeout"), 300.0),
        )


HOST_OVERRIDE_PREFIX = "AzureFunctionsJobHost__"


def apply_host_overrides(document: dict[str, Any], environment: Mapping[str, str]) -> dict[str, Any]:
    """App settings ``AzureFunctionsJobHost__a__b`` override host.json's ``a.b``, as in Azure."""
    for name, value in environment.items():
        if not name.startswith(HOST_OVERRIDE_PREFIX):
            continue
        *parents, leaf = name[len(HOST_OVERRIDE_PREFIX):].split("__")
        node = document
        for part in parents:
            key = next((k for k in node if k.lower() == part.lower()), part)
            node = node.setdefault(key, {})
        key = next((k for k in node if k.lower() == leaf.lower()), leaf)
        node[key] = value
    return document


def apply_local_settings(app_dir: Path) -> dict[str, str]:
    """Put ``local.settings.json`` ``Values`` into the environment; variables already set win."""
    path = app_dir / "local.settings.json"
    if not path.exists():
        return {}
    values = {str(k): str(v) for k, v in json.loads(path.read_text()).get("Values", {}).items()}
    for key, value in values.items():
        os.environ.setdefault(key, value)
    return values


def resolve_app_setting_references(text: str) -> str:
    """``%Name%`` in a binding is the value of app setting ``Name``, as in the Functions host."""

    def lookup(match: re.Match[str]) -> str:
        name = match.group(1)
        value = os.environ.get(name) or os.environ.get(name.replace(":", "__"))
        if value is None:
            raise KeyError(f"app setting {name} (referenced as %{name}%) is not set")
        return value

    return re.sub(r"%([^%]+)%", lookup, text)
