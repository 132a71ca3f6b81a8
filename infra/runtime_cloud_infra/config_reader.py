"""Typed reads of the stack's configuration, and the error that names the key it refuses."""

from __future__ import annotations

import json
from typing import Any

import pulumi


class StackConfigError(ValueError):
    """A stack configuration value the program cannot use; the message names the key."""


class Reader:
    """Typed reads of one namespace; every error names ``namespace:key``."""

    def __init__(self, config: pulumi.Config) -> None:
        self._config = config

    def key(self, key: str) -> str:
        return f"{self._config.name}:{key}"

    def text(self, key: str, default: str | None = None) -> str:
        value = self._config.get(key)
        if value is None or value == "":
            if default is None:
                raise StackConfigError(f"{self.key(key)} is required (see infra/Pulumi.dev.yaml)")
            return default
        return value

    def optional_text(self, key: str) -> str | None:
        return self._config.get(key) or None

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        raw = self._config.get(key)
        try:
            value = default if raw in (None, "") else int(str(raw))
        except ValueError:
            raise StackConfigError(f"{self.key(key)} must be a whole number") from None
        if not low <= value <= high:
            raise StackConfigError(f"{self.key(key)} must be between {low} and {high}, not {value}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        raw = self._config.get(key)
        if raw in (None, ""):
            return default
        if str(raw).lower() not in ("true", "false"):
            raise StackConfigError(f"{self.key(key)} must be true or false")
        return str(raw).lower() == "true"

    def structured(self, key: str, default: Any, expected: type) -> Any:
        raw = self._config.get(key)
        if raw in (None, ""):
            return default
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            raise StackConfigError(f"{self.key(key)} must be YAML (stack file) or JSON text") from None
        if not isinstance(value, expected):
            raise StackConfigError(f"{self.key(key)} must be a {expected.__name__}")
        return value
