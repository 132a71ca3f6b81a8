"""What a host process and its job scaler cost to start: the CPU time of a fresh interpreter.

Every local host loads ``function_app`` and starts ``python -m runner_job scale`` beside itself (the test
suite starts about a hundred of each, on a machine where CPU is what runs out); in Azure (Flex
Consumption) the import of ``function_app`` is the cold start. Measured in one run, on one machine,
against an Azurite of its own, each a fresh interpreter run to its end, CPU time (user + system, from
the children's resource usage):

- **baseline**: ``import azure.functions`` (what any Python function app imports), with ``python -c
  pass`` beside it for context;
- **function_app**: ``import function_app`` with a test host's settings (app_settings in
  tests/conftest.py): the imports, the settings, telemetry, the store's resources prepared (found there:
  a warm-up run created them) and every enabled feature's triggers registered;
- **scaler**: ``python -m runner_job scale`` with its standard input closed: its imports, its settings
  and its queues, then it stops, as a scaler whose host never asks for a job;
- **scaler + runners**: ``import runner_job.scaler, runner_job.job, pulumi.automation``: what a scaler
  holds once its first request arrived (it imports the runners and the Pulumi Automation API then,
  before its first fork, so each forked job starts with them loaded).

Runs interleave (one of each case per round) so that a change in the machine's load reaches every case
alike; each figure is the median of the rounds. Printed: CPU seconds and the ratio to the baseline.
Recorded in ``.data/bench/latest.json``: ``startup_function_app_ratio``, ``startup_scaler_ratio`` and
``startup_scaler_runners_ratio``.

Run: ``.venv/bin/python bench/startup.py [rounds]`` (7 rounds by default; under a minute).
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._results import record
from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings

BASELINE = "import azure.functions"
CASES: dict[str, list[str]] = {
    "python -c pass": ["-c", "pass"],
    BASELINE: ["-c", "import azure.functions"],
    "import function_app": ["-c", "import function_app"],
    "python -m runner_job scale": ["-m", "runner_job", "scale"],
    "scaler + runners": ["-c", "import runner_job.scaler, runner_job.job, pulumi.automation"],
}
KEYS = {
    "import function_app": "startup_function_app_ratio",
    "python -m runner_job scale": "startup_scaler_ratio",
    "scaler + runners": "startup_scaler_runners_ratio",
}


def cpu_seconds(arguments: list[str], environment: dict[str, str]) -> float:
    """User + system CPU of one fresh interpreter, run to its end (standard input closed)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, *arguments],
        cwd=REPO,
        env=environment,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(rounds: int) -> None:
    samples: dict[str, list[float]] = {case: [] for case in CASES}
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        azurite = Azurite(root / "azurite").start()
        try:
            environment = {**os.environ, **app_settings(azurite, root / "auth"), "PYTHONPATH": str(REPO)}
            for arguments in CASES.values():  # warm-up: byte code written, the store's resources created
                cpu_seconds(arguments, environment)
            for _ in range(rounds):
                for case, arguments in CASES.items():
                    samples[case].append(cpu_seconds(arguments, environment))
        finally:
            azurite.stop()
    medians = {case: statistics.median(values) for case, values in samples.items()}
    baseline = medians[BASELINE]
    print(f"fresh interpreters, median of {rounds} rounds, CPU seconds (user + system)")
    for case, median in medians.items():
        spread = f"{min(samples[case]):.3f}-{max(samples[case]):.3f}"
        print(f"  {case:<28} {median:6.3f} s  ({spread})  {median / baseline:5.2f}x the baseline")
    record(
        "startup",
        {key: medians[case] / baseline for case, key in KEYS.items()},
        {"cpu_seconds": {case: round(median, 4) for case, median in medians.items()}, "rounds": rounds},
    )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 7)
