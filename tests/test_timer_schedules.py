"""Timer schedules come from app settings and a bad one stops the host, naming the setting.

The product's schedules are settings (validated with croniter when the app is
imported) that its timers declare as ``%Section:Name%`` references; the local
host resolves references as the Functions host does and refuses what it would
refuse. Both are driven here by starting host processes.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from shared.platform.settings_section import six_field_ncrontab
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess

PROBE_APP = """
import azure.functions as func

app = func.FunctionApp()


@app.timer_trigger(arg_name="timer", schedule="{schedule}")
def probe(timer: func.TimerRequest) -> None:
    pass
"""


def refused(host: HostProcess) -> str:
    """Start ``host`` expecting it to stop at start with exit code 2; returns its log."""
    with pytest.raises(RuntimeError) as stopped:
        host.start()
    assert re.match(r"host exited with 2:", str(stopped.value)), str(stopped.value)[:2000]
    return host.log()


def probe_app(tmp_path: Path, schedule: str) -> Path:
    app = tmp_path / "probe_app"
    app.mkdir()
    (app / "function_app.py").write_text(PROBE_APP.format(schedule=schedule))
    (app / "host.json").write_text('{"version": "2.0"}')
    return app


@pytest.mark.parametrize(
    "setting, value",
    [
        ("RuntimeCloud__Provisioning__ReconcileSchedule", "99 99 99 99 99 99"),
        ("RuntimeCloud__Inventory__ScanSchedule", "0 0 25 * * *"),
        ("RuntimeCloud__Durable__PurgeSchedule", "0 0 0 L * *"),
    ],
)
def test_a_bad_schedule_setting_stops_the_product_host_naming_it(azurite, key_dir, tmp_path, setting, value):
    host = HostProcess(REPO, app_settings(azurite, key_dir, **{setting: value}), tmp_path / "host.log")

    log = refused(host)

    assert setting in log and value in log


def test_the_local_host_resolves_a_schedule_reference_with_colons(azurite, tmp_path):
    app = probe_app(tmp_path, "%Probe:Schedule%")
    env = {"AzureWebJobsStorage": azurite.connection_string(), "probe__SCHEDULE": "0 0 0 1 1 *"}
    host = HostProcess(app, env, tmp_path / "host.log").start()  # any case, as the host's configuration
    try:
        assert "probe: timerTrigger" in host.log()
    finally:
        assert host.stop() == 0


@pytest.mark.parametrize(
    "schedule, value, named",
    [
        ("%Probe:Schedule%", None, "app setting Probe__Schedule is not set"),
        ("%Probe:Schedule%", "0 0 25 * * *", "(app setting Probe__Schedule) is invalid"),
        ("%Probe:Schedule%", "*/5 * * * *", "(app setting Probe__Schedule) is invalid"),
        ("%Probe__Schedule%", "0 0 0 1 1 *", "is written %Probe:Schedule%"),  # Azure resolves no '__' in a reference
    ],
)
def test_the_local_host_refuses_a_schedule_the_functions_host_would(azurite, tmp_path, schedule, value, named):
    env = {"AzureWebJobsStorage": azurite.connection_string()}
    if value is not None:
        env["Probe__Schedule"] = value
    host = HostProcess(probe_app(tmp_path, schedule), env, tmp_path / "host.log")

    log = refused(host)

    assert "timer function probe" in log and named in log


@pytest.mark.parametrize(
    "expression",
    [
        "99 99 99 99 99 99",
        "0 0 25 * * *",
        "*/5 * * * *",
        "0 0 0 * * 7",
        "0 0 0 L * *",
        "0 0 0 * * 1#2",
        "0 0 0 ? * *",
        "0 5-3 * * * *",
        "*/0 * * * * *",
        "0 0 0 * FOO *",
    ],
)
def test_schedules_ncrontab_refuses_are_refused(expression):
    with pytest.raises(ValueError):
        six_field_ncrontab(expression)


@pytest.mark.parametrize("expression", ["0 */5 * * * *", "*/15 * * * * *", "0 45 3 * * MON-FRI", "0 0 0 1 JAN *"])
def test_ncrontab_schedules_are_accepted(expression):
    assert six_field_ncrontab(expression) == expression
