"""JSON values whose content is the user's, not the host's.

An orchestration's input, output and custom status, an event's data, host.json's
free-form sections: the host carries them without knowing their shape, so they
are typed as what JSON can hold rather than ``Any``. Everything whose shape the
host does know (history events, engine messages, management API answers) has a
TypedDict of its own beside the code that writes it.
"""

from __future__ import annotations

from typing import TypeAlias

# What json.loads can answer (a recursive alias: mypy follows it; Python 3.11 has no ``type`` statement).
JsonValue: TypeAlias = "str | int | float | bool | None | list[JsonValue] | dict[str, JsonValue]"
# A JSON object of the user's (or of a document whose members the host reads one by one, checking each).
JsonObject: TypeAlias = "dict[str, JsonValue]"

__all__ = ["JsonObject", "JsonValue"]
