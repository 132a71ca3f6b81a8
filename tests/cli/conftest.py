"""The operator CLI as an operator runs it, in a process of its own, against the session's local host.

The tests run the checkout's code (``python -m runtime_cloud_cli`` in the repository), which is what the
``runtime-cloud`` console script `make setup` installs runs (a copy, renewed when the sources change)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO
from tests.support.host import HostProcess

CONSOLE_SCRIPT = Path(sys.executable).parent / "runtime-cloud"


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


Cli = Callable[..., Result]


def run_cli(args: list[str], env: dict[str, str], timeout: float = 180) -> Result:
    done = subprocess.run(
        [sys.executable, "-m", "runtime_cloud_cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Result(done.returncode, done.stdout, done.stderr)


@pytest.fixture(scope="session")
def cli_env(runtime_host: HostProcess, key_dir: Path) -> dict[str, str]:
    """The CLI's environment: the session host's URL, and the local issuer's key that host trusts."""
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("RUNTIME_CLOUD_")}
    return {
        **inherited,
        "RUNTIME_CLOUD_URL": runtime_host.base_url,
        "RUNTIME_CLOUD_APP_DIR": str(REPO),
        "RuntimeCloud__Auth__LocalSigningKeyDirectory": str(key_dir),
        "COLUMNS": "200",  # tables wide enough to read in a failure's output
    }


@pytest.fixture(scope="session")
def cli(cli_env: dict[str, str]) -> Cli:
    """``cli("runs", "list", token=...)`` or ``cli("--local-issuer", "--tenant", "t", "runs", "list")``."""

    def _cli(*args: str, token: str | None = None, timeout: float = 180, **env: str) -> Result:
        prefix = ["--token", token] if token else []
        return run_cli([*prefix, *args], {**cli_env, **env}, timeout)

    return _cli


def as_person(tenant: str, person: str, *roles: str) -> list[str]:
    """The global options of a person's token from the local issuer (every API scope, the given roles)."""
    options = ["--local-issuer", "--tenant", tenant, "--principal", person, "--client-id", "ops-cli"]
    for role in roles:
        options += ["--role", role]
    return options
