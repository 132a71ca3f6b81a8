"""The local host's own endpoints want keys, as Azure's master and system keys guard them.

Before, anyone who could reach the host (another local user, or a web page in
the developer's browser) could run any function through the admin API and
read or steer every orchestration through the Durable webhooks. These tests
call the host as such an attacker would: no key, a wrong key, another Host
header, a body that is not JSON or is too large.
"""

from __future__ import annotations

import json
import subprocess
import sys

import requests

from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess, wait_until
from tests.test_local_host_triggers import effects

PROBLEM = "application/problem+json"


def _admin(host: HostProcess, name: str, key: str | None, **kwargs) -> requests.Response:
    headers = kwargs.pop("headers", {})
    if key is not None:
        headers["x-functions-key"] = key
    return requests.post(host.url(f"admin/functions/{name}"), headers=headers, timeout=30, **kwargs)


def test_the_admin_api_without_the_master_key_runs_nothing_and_says_nothing(fixture_host, azurite):
    before = len(effects(azurite, "yearly-report"))

    anonymous = _admin(fixture_host, "yearly_report", None, json={"input": ""})
    wrong = _admin(fixture_host, "yearly_report", "not-the-key", json={"input": ""})
    unknown = _admin(fixture_host, "no_such_function", None, json={"input": ""})
    from_a_web_page = _admin(
        fixture_host,
        "yearly_report",
        None,
        data="{}",
        headers={"Content-Type": "text/plain", "Origin": "https://evil.example"},
    )

    for answer in (anonymous, wrong, unknown, from_a_web_page):
        assert answer.status_code == 401
        assert answer.headers["Content-Type"].startswith(PROBLEM)
        assert "needs a host key" in answer.json()["detail"]
    assert anonymous.json() == unknown.json()  # an unknown function looks like a known one

    # A run with the key, started after the refused ones: once it has recorded itself, a run the
    # refused requests had (wrongly) started before it would have too.
    assert _admin(fixture_host, "yearly_report", fixture_host.master_key, json={"input": ""}).status_code == 202
    wait_until(lambda: len(effects(azurite, "yearly-report")) > before, timeout=20, message="the keyed run")
    assert len(effects(azurite, "yearly-report")) == before + 1


def test_the_admin_api_with_the_master_key_takes_only_bounded_json(fixture_host, azurite):
    key = fixture_host.master_key

    text = _admin(fixture_host, "yearly_report", key, data='{"input": ""}', headers={"Content-Type": "text/plain"})
    huge = _admin(fixture_host, "yearly_report", key, json={"input": "x" * (300 * 1024)})
    not_json = _admin(fixture_host, "yearly_report", key, data="{nope", headers={"Content-Type": "application/json"})
    before = len(effects(azurite, "yearly-report"))
    accepted = _admin(fixture_host, "yearly_report", key, json={"input": ""})
    by_query = requests.post(
        fixture_host.url(f"admin/functions/yearly_report?code={key}"), json={"input": ""}, timeout=30
    )

    assert (text.status_code, huge.status_code, not_json.status_code) == (415, 413, 400)
    assert accepted.status_code == 202 and by_query.status_code == 202
    wait_until(lambda: len(effects(azurite, "yearly-report")) >= before + 2, timeout=20, message="two admin runs")


def test_a_request_naming_another_host_is_refused_as_dns_rebinding(fixture_host):
    answer = requests.get(fixture_host.url("echo/alice"), headers={"Host": "attacker.example"}, timeout=30)

    assert answer.status_code == 421
    assert answer.headers["Content-Type"].startswith(PROBLEM)


def test_listening_beyond_loopback_needs_an_explicit_opt_in(azurite, key_dir, tmp_path):
    host = HostProcess(REPO / "tests" / "fixture_app", app_settings(azurite, key_dir), tmp_path / "bind.log")
    env = {**host.env, "PYTHONPATH": str(REPO)}
    import os

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "devhost",
            "start",
            "--app-dir",
            str(host.app_dir),
            "--port",
            str(host.port),
            "--bind",
            "0.0.0.0",
        ],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert result.returncode == 2
    assert "--allow-remote" in result.stdout + result.stderr


def test_devhost_keys_shows_the_keys_the_host_checks(fixture_host):
    import os

    shown = subprocess.run(
        [sys.executable, "-m", "devhost", "keys"],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "DEVHOST_KEY_DIRECTORY": fixture_host.env["DEVHOST_KEY_DIRECTORY"]},
        timeout=30,
    )

    document = json.loads(shown.stdout)
    assert document["masterKey"] == fixture_host.master_key
    durable_key_on_admin = _admin(
        fixture_host, "yearly_report", document["systemKeys"]["durabletask_extension"], json={"input": ""}
    )
    assert durable_key_on_admin.status_code == 401  # the Durable key does not open the admin API
    assert "needs a host key" in durable_key_on_admin.json()["detail"]
