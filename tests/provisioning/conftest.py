"""Provisioning tests drive the session's host; hosts with other settings are started per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from devhost.azurite import Azurite
from tests.conftest import app_settings
from tests.support.host import HostProcess


def provisioning_settings(azurite: Azurite, key_dir: Path, **overrides: str) -> dict[str, str]:
    """The settings of every test host of the app (see ``tests.conftest.app_settings``)."""
    return app_settings(azurite, key_dir, **overrides)


@pytest.fixture
def provisioning_host(runtime_host: HostProcess) -> HostProcess:
    return runtime_host
