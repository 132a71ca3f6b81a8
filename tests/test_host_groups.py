"""A group's host starts once for the group's tests and stops when the next test is not the group's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import cast

import pytest

from tests.conftest import DURABLE_HOST_GROUP, FIXTURE_HOST_GROUP, HOST_GROUPS, REPO
from tests.support.host_groups import HostGroup


def _item(nodeid: str) -> pytest.Item:
    return cast(pytest.Item, SimpleNamespace(nodeid=nodeid))


def test_the_host_starts_once_for_the_group_and_stops_after_its_last_test() -> None:
    group: HostGroup[str] = HostGroup("g", frozenset({"tests/a.py", "tests/b.py"}))
    events: list[str] = []

    def start() -> str:
        events.append("start")
        return f"host-{len(events)}"

    first = group.shared(start, lambda host: events.append(f"stop {host}"))
    group.leave(_item("tests/b.py::test_one"))  # the next test is the group's: the host stays
    second = group.shared(start, lambda host: events.append(f"stop {host}"))
    group.leave(_item("tests/c.py::test_other"))
    assert first == second == "host-1"
    assert events == ["start", "stop host-1"]
    group.leave(None)  # nothing running: nothing to stop
    assert group.shared(start, lambda host: events.append(f"stop {host}")) == "host-3"  # started again when asked
    group.leave(None)  # the end of the run
    assert events == ["start", "stop host-1", "start", "stop host-3"]


def test_the_groups_are_disjoint_and_name_modules_that_exist() -> None:
    assert HOST_GROUPS == (FIXTURE_HOST_GROUP, DURABLE_HOST_GROUP)
    assert not FIXTURE_HOST_GROUP.modules & DURABLE_HOST_GROUP.modules
    missing = [module for group in HOST_GROUPS for module in group.modules if not (REPO / module).is_file()]
    assert missing == []
