"""The chaos run's report: ``report.json`` (everything) and a short table, printed and in ``report.txt``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tools.chaos.invariants import Check


def write(folder: Path, checks: list[Check], facts: dict[str, Any]) -> str:
    document = {
        **facts,
        "held": all(check.held for check in checks),
        "invariants": [
            {
                "name": check.name,
                "meaning": check.meaning,
                "held": check.held,
                "count": check.count,
                "violations": check.violations[:50],
                "violation_count": len(check.violations),
            }
            for check in checks
        ],
    }
    (folder / "report.json").write_text(json.dumps(document, indent=2, default=str))
    table = _table(checks, facts)
    (folder / "report.txt").write_text(table)
    return table


def _table(checks: list[Check], facts: dict[str, Any]) -> str:
    width = max(len(check.name) for check in checks)
    lines = [
        f"chaos run seed={facts['seed']} minutes={facts['minutes']} faults={facts['faults_by_kind']}",
        f"{'invariant':<{width}}  {'result':<6}  {'checked':>7}  violations",
    ]
    for check in checks:
        result = "ok" if check.held else "FAILED"
        lines.append(f"{check.name:<{width}}  {result:<6}  {check.count:>7}  {len(check.violations)}")
    lines.append(f"replay: make chaos CHAOS_ARGS='--seed {facts['seed']} --minutes {facts['minutes']}'")
    return "\n".join(lines) + "\n"
