"""``%Name%`` references to app settings, resolved as the Functions host resolves them.

The host resolves a binding's ``%Name%`` (a timer's ``schedule``, a queue
name, host.json's ``durableTask.hubName``) with its configuration
(``DefaultNameResolver``: ``configuration[Name]``). Its configuration reads
app settings from environment variables, turning ``__`` in a variable's name
into ``:`` (Linux allows no ``:`` in a name), and looks keys up without regard
to case. So:

- ``%RuntimeCloud:Inventory:ScanSchedule%`` is the app setting
  ``RuntimeCloud__Inventory__ScanSchedule``;
- ``%RuntimeCloud__Inventory__ScanSchedule%`` resolves to nothing (the key
  ``RuntimeCloud__Inventory__ScanSchedule`` does not exist once ``__`` became
  ``:``), so it is refused here as it fails there;
- a reference that resolves to nothing is an error ("does not resolve to a
  value"), never the literal text.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

_REFERENCE = re.compile(r"%([^%]*)%")


class UnresolvedAppSetting(KeyError):
    """A ``%Name%`` reference names no app setting; the message says which and how to set it."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unresolved app setting reference"


def configuration_key(variable: str) -> str:
    """The key the host's configuration files an environment variable under."""
    return variable.replace("__", ":").lower()


def lookup(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """``configuration[name]``: the app setting's value, or None."""
    wanted = name.lower()
    values = os.environ if environ is None else environ
    return next((value for key, value in values.items() if configuration_key(key) == wanted), None)


def resolve_references(text: str, environ: Mapping[str, str] | None = None) -> str:
    """Replace every ``%Name%`` in ``text``; raise :class:`UnresolvedAppSetting` for one that names nothing."""

    def value_of(match: re.Match[str]) -> str:
        name = match.group(1)
        value = lookup(name, environ)
        if value is None:
            raise UnresolvedAppSetting(_unresolved(name))
        return value

    if text.count("%") % 2:
        raise UnresolvedAppSetting(f"{text!r}: a '%' has no closing '%'")
    return _REFERENCE.sub(value_of, text)


def _unresolved(name: str) -> str:
    if "__" in name:
        return (
            f"'%{name}%' does not resolve to a value: the Functions host reads app setting {name} as "
            f"{name.replace('__', ':')}, so a reference to it is written %{name.replace('__', ':')}%"
        )
    return f"'%{name}%' does not resolve to a value: app setting {name.replace(':', '__')} is not set"
