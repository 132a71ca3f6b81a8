"""The IaC runners a specification can name (``RuntimeCloud:IaC:Runner`` picks the host's default)."""

from __future__ import annotations

from enum import Enum


class RunnerName(str, Enum):
    PULUMI = "pulumi"
    EMBEDDED = "embedded"
