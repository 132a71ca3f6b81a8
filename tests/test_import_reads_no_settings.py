"""Importing the app's modules reads no setting; a binding names its app setting or the model's default.

Settings are read when something runs (``get_settings()``, read once), never
when a module is imported, so an import never fails for want of a setting and
a test may import a trigger module before it sets the environment. A binding
that is a setting (a timer's schedule, the runner jobs' results queue) is fixed
when the host indexes the app: it declares ``%Section:Name%`` when the app
setting is set (the host resolves it) and the settings model's default when it
is not (``shared.wiring.settings.setting_binding``), the value the app read
from its settings before. Each check runs in a fresh interpreter with an
environment of its own (no ``RuntimeCloud__`` setting unless the test sets it).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from tests.conftest import REPO

PACKAGES = ("functions", "orchestrations", "shared")

# Imports every module of PACKAGES, counting the settings reads; then lists the triggers' bindings
# that may be settings (timer schedules, queue names) and the settings model read with no setting set.
PROBE = """
import importlib, json, pkgutil, sys

import shared.wiring.settings as root

reads = []
real_load = root.load_settings
root.load_settings = lambda: reads.append(1) or real_load()

imported = []
for package in sys.argv[1:]:
    top = importlib.import_module(package)
    imported.append(package)
    for info in pkgutil.walk_packages(top.__path__, package + "."):
        importlib.import_module(info.name)
        imported.append(info.name)

import azure.durable_functions as df

app = df.DFApp()
for name in imported:
    blueprint = getattr(sys.modules[name], "bp", None)
    if isinstance(blueprint, df.Blueprint):
        app.register_functions(blueprint)
bindings = {}
for function in app.get_functions():
    for binding in function.get_bindings():
        found = binding.get_dict_repr()
        if found["type"] in ("timerTrigger", "queueTrigger"):
            bindings[function.get_function_name()] = found.get("schedule") or found["queueName"]

print(json.dumps({
    "imported": imported,
    "settings_reads": len(reads) + root.get_settings.cache_info().misses,
    "bindings": bindings,
    "defaults": root.Settings().model_dump(by_alias=True, mode="json"),
}))
"""


def probe(**settings: str) -> dict:
    """Run PROBE with only ``settings`` (and what Python needs) in the environment."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *PACKAGES],
        cwd=REPO,
        env={**env, **settings},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.splitlines()[-1])


def module_count(package: str) -> int:
    return sum(1 for path in (REPO / package).rglob("*.py") if "__pycache__" not in path.parts)


def bound_settings() -> list[str]:
    """Every app setting a binding names (``setting_binding("RuntimeCloud:...")`` in the triggers)."""
    sources = [*(REPO / "functions").rglob("*.py"), *(REPO / "orchestrations").rglob("*.py")]
    names = {name for path in sources for name in re.findall(r'setting_binding\("([^"]+)"\)', path.read_text())}
    return sorted(names)


def default_of(defaults: dict, setting: str) -> object:
    value: object = defaults
    for part in setting.split(":"):
        assert isinstance(value, dict), setting
        value = value[part]
    return value


def test_every_module_imports_with_no_setting_and_reads_none():
    found = probe()

    assert found["settings_reads"] == 0
    for package in PACKAGES:  # every module was imported, not just the packages
        assert sum(1 for name in found["imported"] if name.split(".")[0] == package) == module_count(package)


def test_a_binding_declares_the_settings_default_when_its_app_setting_is_not_set():
    names = bound_settings()
    unset = probe()

    declared = set(unset["bindings"].values())
    assert len(names) >= 16  # fifteen timer schedules and the runner jobs' results queue
    for name in names:
        assert default_of(unset["defaults"], name) in declared, name
    assert not [value for value in declared if "%" in value]


def test_a_binding_names_its_app_setting_when_it_is_set():
    names = bound_settings()
    values = {name: ("0 */5 * * * *" if name.endswith("Schedule") else "probe-queue") for name in names}
    unset, set_ = probe(), probe(**{name.replace(":", "__"): value for name, value in values.items()})

    references = {function: value for function, value in set_["bindings"].items() if value.startswith("%")}
    assert sorted(value.strip("%") for value in references.values()) == names
    for function, reference in references.items():  # the same binding declared the default before
        assert unset["bindings"][function] == default_of(unset["defaults"], reference.strip("%"))
    timers = [function for function, value in unset["bindings"].items() if len(value.split()) == 6]
    assert set(timers) <= set(references)  # every timer's schedule is a setting
