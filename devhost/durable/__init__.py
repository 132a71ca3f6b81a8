"""The local host's Durable Functions engine (see README.md beside this file)."""

from __future__ import annotations

from devhost.durable.extension import DurableExtension

__all__ = ["DurableExtension"]
