"""functions/blueprint.py types the SDK's blueprint for the trigger modules: every decorator it declares is
the SDK's, with parameters the SDK's decorator takes under the same names and defaults."""

from __future__ import annotations

import inspect

import azure.durable_functions as df
import pytest

from functions.blueprint import TriggerBlueprint, trigger_blueprint

DECLARED = [
    name
    for klass in TriggerBlueprint.__mro__
    if klass.__name__.endswith("Blueprint")
    for name, member in vars(klass).items()
    if inspect.isfunction(member) and not name.startswith("_")
]


def test_it_declares_the_decorators_the_trigger_modules_use():
    assert {"route", "queue_trigger", "timer_trigger", "durable_client_input"} <= set(DECLARED)


@pytest.mark.parametrize("name", DECLARED)
def test_each_declared_decorator_is_the_sdks_with_its_parameters(name):
    ours = inspect.signature(getattr(TriggerBlueprint, name)).parameters
    sdk = inspect.signature(getattr(df.Blueprint, name)).parameters
    for parameter in list(ours.values())[1:]:  # after self
        assert parameter.name in sdk, f"{name}: the SDK takes no {parameter.name}"
        if parameter.default is not inspect.Parameter.empty:
            assert sdk[parameter.name].default == parameter.default, f"{name}: {parameter.name}'s default"
        else:
            assert sdk[parameter.name].default is inspect.Parameter.empty, f"{name}: {parameter.name} is optional"


def test_it_makes_the_sdks_blueprint():
    assert isinstance(trigger_blueprint(), df.Blueprint)
