"""``python -m devhost token`` refuses (exit 2, no token printed) what the host would refuse; what it
prints, the host accepts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.host import HostProcess


def devhost_token(key_dir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "devhost", "token", "--app-dir", str(REPO), "--key-dir", str(key_dir), *args]
    return subprocess.run(
        command, cwd=REPO, env={**os.environ, **env}, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--tenant", "tenant/a"], "is not a tenant id"),
        (["--tenant", "tenant-a", "--lifetime", "999999"], "lifetime exceeds 86400 seconds"),
        (["--tenant", "tenant-a", "--lifetime", "-3600"], "token expired"),
        (["--tenant", "tenant-a", "--object-id", "AutoScaler"], "principal is not accepted"),
        (["--tenant", "tenant-a", "--client-id", "system:backup"], "principal is not accepted"),  # sub, without oid
    ],
)
def test_a_token_the_host_would_refuse_is_not_minted(key_dir, args, reason):
    done = devhost_token(key_dir, *args)

    assert done.returncode == 2, done.stdout
    assert done.stdout == ""
    assert "the host would refuse this token (401)" in done.stderr and reason in done.stderr


def test_the_hosts_maximum_lifetime_is_its_setting(key_dir):
    done = devhost_token(key_dir, "--tenant", "tenant-a", RuntimeCloud__Auth__MaxTokenLifetimeSeconds="600")

    assert done.returncode == 2 and "lifetime exceeds 600 seconds" in done.stderr
    assert devhost_token(key_dir, "--tenant", "tenant-a", "--lifetime", "600").returncode == 0


def test_a_minted_token_is_accepted_by_the_host(runtime_host: HostProcess, key_dir):
    done = devhost_token(key_dir, "--tenant", "tenant-a", "--scope", "factory.health.read", "--lifetime", "86400")
    assert done.returncode == 0, done.stderr

    answer = runtime_host.request("GET", "runtime-cloud/health", token=done.stdout.strip())

    assert answer.status_code == 200, answer.text


def test_a_signing_key_written_again_signs_the_next_token_not_the_loaded_one(tmp_path):
    """The issuer keeps the key it loaded (loading checks it, tens of milliseconds), but only while the file is
    the same: a key made again in the folder (a developer wiped ``.data/auth``) signs from the next token on."""
    import jwt

    from devhost.tokens import JWKS_FILE, PRIVATE_KEY_FILE, mint_token

    def verified_kid(token: str) -> str:
        jwks = jwt.PyJWKSet.from_json((tmp_path / JWKS_FILE).read_text())
        kid = jwt.get_unverified_header(token)["kid"]
        jwt.decode(token, jwks[kid].key, algorithms=["RS256"], audience="api://runtime-cloud")
        return kid

    first = verified_kid(mint_token(tmp_path, tenant="tenant-a"))
    assert verified_kid(mint_token(tmp_path, tenant="tenant-a")) == first
    (tmp_path / PRIVATE_KEY_FILE).unlink()
    (tmp_path / JWKS_FILE).unlink()
    second = verified_kid(mint_token(tmp_path, tenant="tenant-a"))
    assert second != first
