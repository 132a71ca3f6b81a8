"""What a timer trigger declares as its ``schedule``: a reference to its schedule setting.

A timer's schedule is an app setting (``RuntimeCloud:Inventory:ScanSchedule``
and the like; written ``RuntimeCloud__Inventory__ScanSchedule`` as an app
setting). The trigger names it with the Functions ``%...%`` syntax, and the
host resolves it from its configuration: ``:`` separates the sections in the
reference, because the host files an app setting's ``__`` as ``:``
(``%RuntimeCloud__Inventory__ScanSchedule%`` would resolve to nothing).

A reference the host cannot resolve makes it refuse the function, and the host
knows no default for it. So a setting that is not set is declared as its
documented default instead, as a literal; the value is the same one the
settings model validated (with croniter) when the app was imported, so a bad
schedule stops the app, naming the setting, before any host sees it.
"""

from __future__ import annotations

import os


def timer_schedule(setting: str, value: str) -> str:
    """``%setting%`` when the app setting is set, else ``value`` (then the settings model's default).

    ``setting`` is the name with ``:`` (``RuntimeCloud:Inventory:ScanSchedule``); ``value`` is what
    the settings model read for it, already validated."""
    variable = setting.replace(":", "__").lower()
    if any(name.lower() == variable for name in os.environ):
        return f"%{setting}%"
    return value
