"""Hosts shared by a few test modules, alive only while a worker runs those modules.

A host of the session's (``fixture_host``, the durable fixture app's host) used by four or five
modules would otherwise stay up in every worker that ran one of them, to the end of the run, polling
its queues all the while (an idle test host costs about 9 % of a core with its Azurite's side). So
its modules form a *group*: under ``make test`` the group is one unit of work for pytest-xdist
(``pytest_xdist_make_scheduler`` in tests/conftest.py), so one worker runs its modules one after the
other, and the host starts for the group's first test and stops after its last
(``pytest_runtest_teardown``). In one process (``TEST_WORKERS=0``), where the modules need not be
adjacent, the host may start more than once; every test still gets one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

import pytest

Shared = TypeVar("Shared")


@dataclass
class HostGroup(Generic[Shared]):
    """The fixture (by name) that gives a group's host, the modules (paths from the repository root) that
    share it, and that host while it runs."""

    fixture: str
    modules: frozenset[str]
    _running: tuple[Shared, Callable[[Shared], object]] | None = None

    def holds(self, item: pytest.Item | None) -> bool:
        return item is not None and item.nodeid.split("::", 1)[0] in self.modules

    def shared(self, start: Callable[[], Shared], stop: Callable[[Shared], object]) -> Shared:
        """The group's host (or what wraps it), started by ``start`` if it is not running."""
        if self._running is None:
            self._running = (start(), stop)
        return self._running[0]

    def leave(self, nextitem: pytest.Item | None) -> None:
        """After a test: stop the host unless the next test is the group's too."""
        if self._running is not None and not self.holds(nextitem):
            (value, stop), self._running = self._running, None
            stop(value)
