"""Azurite for tests: the same helper ``make run`` uses (``devhost.azurite``)."""

from devhost.azurite import HOST_ACCOUNT, TARGET_ACCOUNT, Azurite, free_port, wait_for_port

__all__ = ["HOST_ACCOUNT", "TARGET_ACCOUNT", "Azurite", "free_port", "wait_for_port"]
