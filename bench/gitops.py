"""What the GitOps reconciler costs per binding and per commit, against a real Azurite and a local bare repository.

Measured in one run, in process (the same code the ``gitops-sync`` queue trigger runs):

- **baseline**: reading one binding row (one table read), the least any sync does;
- **idle sync**: a poll of a binding whose branch has not moved: the file read
  from Git and validated, the ledger read and written (``up-to-date``). This is
  what every binding costs every ``PollSchedule`` tick;
- **declaring sync**: a sync that finds a new commit: read, reserve, declare
  the run through provisioning (idempotency key, specification blob, run row,
  event), confirm. (Starting the run's orchestration is not included.)
- **racing syncs**: 8 syncs of one new commit at once (threads), as a poll and
  webhook burst would race: the time until all are done, and that one run came of it.

Recorded in ``.data/bench/latest.json``: ``gitops_idle_sync_ratio`` (idle sync ÷
baseline), ``gitops_declare_ratio`` (declaring sync ÷ idle sync) and
``gitops_race8_ratio`` (8 racing syncs ÷ one declaring sync).

Run: ``.venv/bin/python bench/gitops.py [repeat]`` (default 15; under a minute).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._git import FILE, BareRepository, spec_yaml
from bench._results import record
from devhost.azurite import TARGET_ACCOUNT, Azurite

TENANT, ENVIRONMENT = "bench", "gitops-bench"


def configure(azurite: Azurite, scratch: Path) -> None:
    target = {
        "Id": "local-storage",
        "Kind": "storage-account",
        "Region": "local",
        "Endpoint": azurite.blob_endpoint(TARGET_ACCOUNT),
        "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__local_storage__Connection"},
    }
    os.environ.update(
        {
            "AzureWebJobsStorage": azurite.connection_string(),
            "RuntimeCloud__IaC__Runner": "embedded",
            "RuntimeCloud__Targets": json.dumps([target]),
            "RuntimeCloudTarget__local_storage__Connection": azurite.connection_string(TARGET_ACCOUNT),
            "RuntimeCloud__Auth__LocalSigningKeyDirectory": str(scratch / "auth"),
            "RuntimeCloud__Provisioning__GitAllowedSources": json.dumps([str(scratch / "git")]),
        }
    )


def median(samples: list[float]) -> float:
    return statistics.median(samples)


def measure(scratch: Path, repeat: int) -> dict[str, float]:
    from shared.gitops.bindings import BindingRequest
    from shared.gitops.reconcile import Trigger
    from shared.platform.storage.clients import shared_host_storage
    from shared.platform.storage.resources import ensure_resources
    from shared.wiring import gitops, provisioning

    ensure_resources(shared_host_storage())
    repository = BareRepository(scratch / "git" / "app.git")
    repository.commit({FILE: spec_yaml(ENVIRONMENT)})
    request = BindingRequest(repository=str(repository.path), path=FILE, branch="main")
    gitops.bindings().bind(TENANT, ENVIRONMENT, request, "bench")
    reconciler, store = gitops.reconciler(), gitops.store()
    reconciler.sync(TENANT, ENVIRONMENT, Trigger.MANUAL)  # warm: the first commit declared

    def timed(call: Callable[[], object]) -> float:
        started = time.perf_counter()
        call()
        return time.perf_counter() - started

    baseline = median([timed(lambda: store.get(TENANT, ENVIRONMENT)) for _ in range(repeat)])
    idle = median([timed(lambda: reconciler.sync(TENANT, ENVIRONMENT, Trigger.POLL)) for _ in range(repeat)])
    declaring = []
    for index in range(repeat):
        repository.commit({FILE: spec_yaml(ENVIRONMENT, queues=("a", f"n{index}"))})
        declaring.append(timed(lambda: reconciler.sync(TENANT, ENVIRONMENT, Trigger.POLL)))
    declare = median(declaring)

    commit = repository.commit({FILE: spec_yaml(ENVIRONMENT, queues=("a", "race"))})
    with ThreadPoolExecutor(8) as pool:
        started = time.perf_counter()
        outcomes = list(pool.map(lambda _: reconciler.sync(TENANT, ENVIRONMENT, Trigger.WEBHOOK), range(8)))
        race = time.perf_counter() - started
    runs = {o.run.id for o in outcomes if o.run is not None}
    assert len(runs) == 1, f"8 racing syncs of {commit} declared {len(runs)} runs"
    declared = provisioning.api().run(TENANT, runs.pop())
    assert declared is not None and declared.source.commit == commit
    repository.close()
    print(f"binding row read      {baseline * 1000:8.1f} ms (baseline)")
    print(f"idle sync (no change) {idle * 1000:8.1f} ms  = {idle / baseline:5.1f}x baseline")
    print(f"declaring sync        {declare * 1000:8.1f} ms  = {declare / idle:5.1f}x idle sync")
    print(f"8 racing syncs        {race * 1000:8.1f} ms  = {race / declare:5.1f}x one declaring sync; 1 run")
    return {
        "gitops_idle_sync_ratio": idle / baseline,
        "gitops_declare_ratio": declare / idle,
        "gitops_race8_ratio": race / declare,
    }


def main(repeat: int) -> None:
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        azurite = Azurite(scratch / "azurite").start()
        try:
            configure(azurite, scratch)
            values = measure(scratch, repeat)
        finally:
            azurite.stop()
    record("gitops", values, {"repeat": repeat})


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
