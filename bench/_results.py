"""Where every benchmark records its figures: ``.data/bench/latest.json``.

Each benchmark merges its keys (ratios measured within its own run, plain
numbers) into one JSON object, so a ``make bench`` leaves every measure side
by side and two runs can be compared key by key. Beside the values, ``runs``
says which benchmark wrote which keys, when, and the machine's load average
at the time (the ratios are measured within one run because absolute numbers
move with the load). Not a benchmark itself (the leading underscore keeps ``make bench`` from running it).
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LATEST = Path(__file__).resolve().parents[1] / ".data" / "bench" / "latest.json"


def record(
    benchmark: str, values: dict[str, float], details: dict[str, Any] | None = None, path: Path = LATEST
) -> Path:
    """Merge ``values`` into ``path`` (created if missing); ``details`` go under ``runs[benchmark]``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        document: dict[str, Any] = json.loads(path.read_text())
    except (FileNotFoundError, ValueError):
        document = {}
    document.update({key: round(float(value), 4) for key, value in values.items()})
    runs = document.setdefault("runs", {})
    runs[benchmark] = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "keys": sorted(values),
        **(details or {}),
    }
    path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    print(f"recorded in {path}: " + ", ".join(f"{k} {float(v):.3g}" for k, v in sorted(values.items())))
    return path
