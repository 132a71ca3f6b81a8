"""The local host indexes and validates the app with the Azure Functions Python worker's own code.

On Azure one function the worker refuses fails the whole app, so the local
host must refuse what the worker refuses, and serve results only as the worker
would encode them.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess

REFUSED_APP = Path(__file__).resolve().parent / "refused_app"
PROBLEM = "application/problem+json"


def _validate(app_dir: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "devhost", "validate", "--app-dir", str(app_dir)],
        cwd=REPO,
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _served_functions(host_log: str) -> set[str]:
    """The function names the local host printed in its start-up banner."""
    banner = host_log.split("Functions:", 1)[1].split("Host started", 1)[0]
    return {match.group(1) for match in re.finditer(r"^  (\w+): ", banner, re.MULTILINE)}


def test_the_worker_accepts_every_function_the_local_host_serves(azurite, key_dir, runtime_host):
    result = _validate(REPO, app_settings(azurite, key_dir))

    assert result.returncode == 0, result.stderr
    accepted = set(result.stdout.split())
    assert {
        "runtime_cloud_health",
        "provisioning_run",
        "provisioning_plan",
        "capacity_acquire_lease",
        "inventory_scan_now",
        "promotion_received",
    } <= accepted
    assert accepted == _served_functions(runtime_host.log())


def test_the_local_host_refuses_to_start_an_app_the_worker_refuses(azurite, key_dir, tmp_path):
    host = HostProcess(REFUSED_APP, app_settings(azurite, key_dir), tmp_path / "refused.log")

    with pytest.raises(RuntimeError, match="host exited with 2"):
        host.start(timeout=60)

    log = host.log()
    assert "refuses 3 function(s)" in log
    assert re.search(r"returns_a_dict: .*return annotation \"dict\" does not match binding type \"http\"", log)
    assert re.search(r"unresolvable_annotation: NameError: name 'NotImportedHere' is not defined", log)
    assert re.search(r"parameterised_input: .*invalid non-type annotation dict\[str, typing.Any\]", log)
    assert "a_fine_function" not in log


def test_validate_names_every_refused_function_and_exits_2(azurite, key_dir):
    result = _validate(REFUSED_APP, app_settings(azurite, key_dir))

    assert result.returncode == 2
    refused = re.findall(r"^  - (\w+): ", result.stderr, re.MULTILINE)
    assert sorted(refused) == ["parameterised_input", "returns_a_dict", "unresolvable_annotation"]


def test_an_http_result_the_worker_cannot_encode_is_a_500_problem(fixture_host):
    answer = fixture_host.request("GET", "returns-a-dict")

    assert answer.status_code == 500
    assert answer.headers["Content-Type"].startswith(PROBLEM)
    assert "like JSON" not in answer.text


def test_a_str_result_is_served_as_the_body(fixture_host):
    answer = fixture_host.request("GET", "returns-text")

    assert answer.status_code == 200
    assert answer.text == "plain text"


def test_a_malformed_local_settings_file_is_named_without_a_traceback(tmp_path):
    (tmp_path / "local.settings.json").write_text('{"Values": {')

    result = _validate(tmp_path, {})

    assert result.returncode == 2
    assert "local.settings.json is not valid JSON" in result.stderr
    assert "Traceback" not in result.stderr
