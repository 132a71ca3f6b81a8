"""What every command gets from the global options: the API client and the output."""

from __future__ import annotations

from dataclasses import dataclass

import typer

from runtime_cloud_cli.client import Api
from runtime_cloud_cli.output import Output


@dataclass
class State:
    api: Api
    out: Output


def state(ctx: typer.Context) -> State:
    found = ctx.find_object(State)
    if found is None:  # only when a command is invoked without the root (a programming error)
        raise RuntimeError("the runtime-cloud root options were not parsed")
    return found
