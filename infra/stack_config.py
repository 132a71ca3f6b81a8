"""Write a stack file from an environment specification: the bootstrap applies what the host will apply.

    .venv/bin/python infra/stack_config.py environments/factory/host.yaml > infra/Pulumi.factory.yaml

The specification's ``pulumi.config`` holds strings (structured values as JSON,
as the host's runner passes them); the stack file gets them back as YAML. The
provider keys that make the runner act as its managed identity
(``azure-native:useMsi``, ``azure-native:clientId``) are left out: at bootstrap the
operator's own Azure login applies the stack.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

RUNNER_ONLY = ("azure-native:useMsi", "azure-native:clientId")


def stack_file(specification: dict[str, Any]) -> dict[str, Any]:
    config = (specification.get("pulumi") or {}).get("config") or {}
    return {"config": {key: _value(text) for key, text in config.items() if key not in RUNNER_ONLY}}


def _value(text: str) -> Any:
    stripped = text.strip()
    if stripped.startswith(("[", "{")):
        return json.loads(stripped)
    return text


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    specification = yaml.safe_load(Path(argv[1]).read_text(encoding="utf-8"))
    sys.stdout.write(f"# Written by infra/stack_config.py from {argv[1]}; edit that file, not this one.\n")
    yaml.safe_dump(stack_file(specification), sys.stdout, sort_keys=False, allow_unicode=True, width=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
