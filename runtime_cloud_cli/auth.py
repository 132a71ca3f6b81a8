"""Where the CLI's bearer token comes from.

In order: ``--local-issuer`` (mints one with the local host's development issuer, ``python -m devhost
token``, which refuses what the host would refuse), ``--token-file`` (or RUNTIME_CLOUD_TOKEN_FILE),
``--token`` (or RUNTIME_CLOUD_TOKEN), and for a real deployment ``--azure-scope`` (or
RUNTIME_CLOUD_AZURE_SCOPE, e.g. ``api://runtime-cloud/.default``) through azure-identity's
DefaultAzureCredential (Azure CLI login, managed identity, environment credentials, ...).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from runtime_cloud_cli.client import ApiError
from runtime_cloud_cli.exit_codes import Exit

# What a local token carries when no --scope is given: every scope of the API (roles are never implied).
LOCAL_DEFAULT_SCOPES = (
    "factory.runtime.read",
    "factory.runtime.write",
    "factory.capacity.lease",
    "factory.health.read",
    "factory.meta.read",
)


class Credential(Protocol):
    """What the CLI needs of an azure-identity credential."""

    def get_token(self, *scopes: str) -> Any: ...


@dataclass(frozen=True)
class LocalIssuer:
    """A token of the local host's development issuer (its key in the app folder's ``.data/auth``)."""

    tenant: str
    principal: str | None = None
    client_id: str = "runtime-cloud-cli"
    scopes: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    app_dir: Path = field(default_factory=Path.cwd)

    def command(self) -> list[str]:
        command = [sys.executable, "-m", "devhost", "token", "--app-dir", str(self.app_dir)]
        command += ["--tenant", self.tenant, "--client-id", self.client_id]
        if self.principal:
            command += ["--object-id", self.principal]
        for scope in self.scopes or LOCAL_DEFAULT_SCOPES:
            command += ["--scope", scope]
        for role in self.roles:
            command += ["--role", role]
        return command

    def token(self) -> str:
        # A process of its own: the CLI imports nothing of the local host (pyproject.toml, import contracts).
        done = subprocess.run(self.command(), cwd=self.app_dir, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            reason = (done.stderr.strip().splitlines() or ["no reason given"])[-1]
            raise ApiError(f"the local issuer refused: {reason}", Exit.AUTH)
        return done.stdout.strip()


def azure_token(credential: Credential, scope: str) -> str:
    """A token for ``scope`` from an azure-identity credential (DefaultAzureCredential in real use)."""
    from azure.core.exceptions import ClientAuthenticationError

    try:
        return str(credential.get_token(scope).token)
    except ClientAuthenticationError as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ApiError(f"no Azure token for {scope}: {first}", Exit.AUTH) from None


def default_azure_token(scope: str) -> str:
    from azure.identity import DefaultAzureCredential

    return azure_token(DefaultAzureCredential(), scope)


def file_token(path: Path) -> str:
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise ApiError(f"cannot read the token file {path}: {error.strerror}", Exit.AUTH) from None
    if not token:
        raise ApiError(f"the token file {path} is empty", Exit.AUTH)
    return token


def no_token() -> str:
    raise ApiError(
        "no token: give --token, --token-file, --azure-scope or --local-issuer (or RUNTIME_CLOUD_TOKEN)", Exit.AUTH
    )
