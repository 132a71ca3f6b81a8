"""What a trigger's binding declares for a value that is an app setting: a timer's schedule, a queue's name.

A timer's schedule is an app setting (``RuntimeCloud:Inventory:ScanSchedule``
and the like; written ``RuntimeCloud__Inventory__ScanSchedule`` as an app
setting), and so is the queue of the runner jobs' notices. The binding names
it with the Functions ``%...%`` syntax, and the host resolves it from its
configuration: ``:`` separates the sections in the reference, because the host
files an app setting's ``__`` as ``:`` (``%RuntimeCloud__Inventory__ScanSchedule%``
would resolve to nothing).

A reference the host cannot resolve makes it refuse the function, and the host
knows no default for it. So a setting that is not set is declared as the
settings model's default instead, as a literal (the caller passes the default
the model declares, not a value read from the settings). Bindings are fixed
when the host indexes the app, that is when ``function_app.py`` is imported:
what is looked at then is only whether the app setting exists; its value is
the host's to resolve, and the settings model validates the same value when
``function_app.py`` reads the settings, so a bad schedule stops the app, naming
the setting, before any host uses it.
"""

from __future__ import annotations

import os


def binding_value(setting: str, default: str) -> str:
    """``%setting%`` when the app setting is set, else ``default`` (the settings model's default for it).

    ``setting`` is the name with ``:`` (``RuntimeCloud:Inventory:ScanSchedule``); the host looks app
    settings up without regard to case, and so does this."""
    variable = setting.replace(":", "__").lower()
    if any(name.lower() == variable for name in os.environ):
        return f"%{setting}%"
    return default
