"""What the CLI prints: JSON for scripts (``--json``), rich tables for people; errors on stderr."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

# A column: its header, and the item's field (a dotted path) or a function of the item.
Column = tuple[str, str | Callable[[Mapping[str, Any]], Any]]


class Output:
    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self.console = Console(soft_wrap=True)
        self.errors = Console(stderr=True, soft_wrap=True)

    def json(self, document: Any) -> None:
        print(json.dumps(document, indent=2, sort_keys=True, default=str))

    def items(self, items: Sequence[Mapping[str, Any]], columns: Sequence[Column], title: str | None = None) -> None:
        """A list: a JSON array, or a table with one row per item."""
        if self.as_json:
            self.json(list(items))
            return
        table = Table(title=title, show_lines=False, header_style="bold")
        for header, _ in columns:
            table.add_column(header)
        for item in items:
            table.add_row(*(Text(_text(_cell(item, key))) for _, key in columns))
        self.console.print(table)
        if not items:
            self.console.print("(none)")

    def document(self, document: Mapping[str, Any] | None, fields: Iterable[str] | None = None) -> None:
        """One object: as JSON, or its (chosen) fields as a two-column table."""
        if self.as_json:
            self.json(document)
            return
        if document is None:
            self.console.print("done")
            return
        table = Table(show_header=False, box=None, pad_edge=False)
        table.add_column(style="bold")
        table.add_column()
        for name in fields or document.keys():
            value = _cell(document, name)
            if value is not None:
                table.add_row(name, Text(_text(value)))
        self.console.print(table)

    def say(self, message: str) -> None:
        """A line for people (not printed with --json, where stdout is the document alone)."""
        if not self.as_json:
            self.console.print(message, highlight=False)

    def error(self, message: str) -> None:
        self.errors.print(f"error: {message}", highlight=False, markup=False)


def _cell(item: Mapping[str, Any], key: str | Callable[[Mapping[str, Any]], Any]) -> Any:
    if callable(key):
        return key(item)
    value: Any = item
    for part in key.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True, default=str)
