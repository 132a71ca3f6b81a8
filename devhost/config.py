"""The host's configuration: ``local.settings.json`` and ``host.json``.

A file the host cannot use stops it with a :class:`ConfigError` that names the
file and what is wrong with it (the host prints it; no traceback), as the
Functions host refuses to start on a host.json it cannot parse.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from devhost.json_value import JsonObject, JsonValue


class ConfigError(ValueError):
    """``host.json`` or ``local.settings.json`` cannot be used; the message names the file and the problem."""


def parse_timespan(value: JsonValue, default: float) -> float:
    """``hh:mm:ss[.fff]`` (or ``d.hh:mm:ss``) as seconds, the way host.json writes durations.

    A bare number is refused: the Functions host binds it with ``TimeSpan.Parse``,
    which reads ``2`` (or ``"2000"``) as that many *days*, so accepting it as seconds
    here would run locally what means something else in Azure.
    """
    if value is None:
        return default
    if isinstance(value, (int, float)) or str(value).strip().isdigit():
        raise ValueError(f"not a time span: {value!r} (Azure would read a bare number as days)")
    if not isinstance(value, str):
        raise ValueError(f"not a time span: {value!r}")
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
class SingletonOptions:
    """host.json ``singleton``: the listener lock a timer function is run under (one host at a time)."""

    listener_lock_period: float = 60.0
    listener_lock_recovery_polling_interval: float = 60.0


@dataclass(frozen=True)
class HostJson:
    route_prefix: str = "api"
    queues: QueueOptions = field(default_factory=QueueOptions)
    durable_task: JsonObject = field(default_factory=dict)
    function_timeout: float = 300.0
    singleton: SingletonOptions = field(default_factory=SingletonOptions)

    @classmethod
    def load(cls, app_dir: Path) -> HostJson:
        """Read ``host.json`` (with app-setting overrides); raises :class:`ConfigError` naming what is wrong."""
        path = app_dir / "host.json"
        document = _json_object(path) if path.exists() else {}
        try:
            return cls._from_document(apply_host_overrides(document, os.environ))
        except (ValueError, TypeError, AttributeError) as error:
            raise ConfigError(f"{path}: {error}") from None

    @classmethod
    def _from_document(cls, document: JsonObject) -> HostJson:
        extensions = _section(document, "extensions")
        queues = _section(extensions, "queues", "extensions.")
        route_prefix = _section(extensions, "http", "extensions.").get("routePrefix", "api")
        if not isinstance(route_prefix, str):
            raise ValueError(f"extensions.http.routePrefix must be a string, not {route_prefix!r}")
        return cls(
            route_prefix=route_prefix,
            queues=QueueOptions(
                max_polling_interval=_timespan(queues, "maxPollingInterval", 60.0, "extensions.queues."),
                visibility_timeout=_timespan(queues, "visibilityTimeout", 0.0, "extensions.queues."),
                batch_size=_whole(queues, "batchSize", 16, "extensions.queues."),
                max_dequeue_count=_whole(queues, "maxDequeueCount", 5, "extensions.queues."),
                message_encoding=str(queues.get("messageEncoding", "base64")).lower(),
            ),
            durable_task=_section(extensions, "durableTask", "extensions."),
            function_timeout=_timespan(document, "functionTimeout", 300.0),
            singleton=_singleton(_section(document, "singleton")),
        )


def _singleton(section: JsonObject) -> SingletonOptions:
    """As the Functions host bounds them: a lock period is a blob lease (15 to 60 s), and the listener
    lock is looked for again no more often than a lease's shortest period."""
    period = _timespan(section, "listenerLockPeriod", 60.0, "singleton.")
    polling = _timespan(section, "listenerLockRecoveryPollingInterval", 60.0, "singleton.")
    if not 15.0 <= period <= 60.0:
        raise ValueError(f"singleton.listenerLockPeriod must be between 00:00:15 and 00:01:00, not {period} s")
    if polling < 15.0:
        raise ValueError(f"singleton.listenerLockRecoveryPollingInterval must be at least 00:00:15, not {polling} s")
    return SingletonOptions(period, polling)


def _json_object(path: Path) -> JsonObject:
    """A JSON file that must hold an object; what is wrong with it is said with its line and column."""
    try:
        document = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as error:
        raise ConfigError(
            f"{path} is not valid JSON: {error.msg} at line {error.lineno}, column {error.colno}"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path} cannot be read: {error}") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path} must hold a JSON object, not {type(document).__name__}")
    return document


def _section(document: JsonObject, key: str, where: str = "") -> JsonObject:
    value = document.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where}{key} must be an object, not {value!r}")
    return value


def _timespan(section: JsonObject, key: str, default: float, where: str = "") -> float:
    try:
        return parse_timespan(section.get(key), default)
    except ValueError:
        raise ValueError(
            f'{where}{key} must be a time span such as "00:05:00" (hh:mm:ss), not {section.get(key)!r}'
        ) from None


def _whole(section: JsonObject, key: str, default: int, where: str = "") -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not str(value).strip().isdigit():
        raise ValueError(f"{where}{key} must be a whole number, not {value!r}")
    return int(value)


HOST_OVERRIDE_PREFIX = "AzureFunctionsJobHost__"


def apply_host_overrides(document: JsonObject, environment: Mapping[str, str]) -> JsonObject:
    """App settings ``AzureFunctionsJobHost__a__b`` override host.json's ``a.b``, as in Azure."""
    for name, value in environment.items():
        if not name.startswith(HOST_OVERRIDE_PREFIX):
            continue
        *parents, leaf = name[len(HOST_OVERRIDE_PREFIX) :].split("__")
        node = document
        for part in parents:
            key = next((k for k in node if k.lower() == part.lower()), part)
            child = node.setdefault(key, {})
            if not isinstance(child, dict):
                raise ValueError(f"app setting {name} overrides inside {key}, which is not an object: {child!r}")
            node = child
        key = next((k for k in node if k.lower() == leaf.lower()), leaf)
        node[key] = value
    return document


def local_settings_values(app_dir: Path) -> dict[str, str]:
    """The ``Values`` of ``local.settings.json`` (none if the file is missing)."""
    path = app_dir / "local.settings.json"
    if not path.exists():
        return {}
    section = _json_object(path).get("Values") or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{path}: Values must be an object of app settings, not {section!r}")
    return {str(k): str(v) for k, v in section.items()}


def apply_local_settings(app_dir: Path) -> dict[str, str]:
    """Put ``local.settings.json`` ``Values`` into the environment; variables already set win."""
    values = local_settings_values(app_dir)
    for key, value in values.items():
        os.environ.setdefault(key, value)
    return values


def resolve_app_setting_references(text: str) -> str:
    """``%Name%`` in a binding is the value of app setting ``Name``, resolved as the Functions host
    resolves it (``:`` between sections, any case; see :mod:`devhost.app_settings`). Raises a
    ``KeyError`` (:class:`~devhost.app_settings.UnresolvedAppSetting`) naming the setting."""
    from devhost.app_settings import resolve_references

    return resolve_references(text)
