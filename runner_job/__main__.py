"""``python -m runner_job``: the runner job's commands.

- ``once``: take one request from the job queue and run it (the Container
  Apps job's command: KEDA starts one execution per queued request);
- ``scale``: the local host's stand-in for that job: fork a process per
  request until standard input closes;
- ``serve``: a warm runner (``runnerJobWarmReplicas``): one request at a time,
  each in a session of its own, its leftovers ended and wiped after it
  (``runner_job.serve``);
- ``run REQUEST``: run the request given as JSON, in this process (by hand).

Settings come from the environment as the app's do (``AzureWebJobsStorage``
or its identity-based form, ``RuntimeCloud__IaC__*``); secrets from Key Vault
with the process's identity, never from the request.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

# The folders a run needs, made again empty after a warm runner's wipe (runner_job/Dockerfile sets them).
_REMADE = ("PULUMI_HOME", "RUNTIME_CLOUD_PULUMI_WORKSPACE")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m runner_job", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("once", help="run one request from the job queue (the Container Apps job)")
    commands.add_parser("scale", help="fork a process per request until stdin closes (the local host)")
    serving = commands.add_parser("serve", help="a warm runner: one request at a time, wiped between runs")
    serving.add_argument("--wipe", action="append", required=True, type=Path, help="a folder wiped between runs")
    serving.add_argument("--reap-user", action="store_true", help="end every other process of the user between runs")
    serving.add_argument("--runs", type=int, default=None, help="stop after this many runs (default: never)")
    run = commands.add_parser("run", help="run the request given as JSON")
    run.add_argument("request")
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=os.environ.get("RUNNER_JOB_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s[%(process)d]: %(message)s",
    )
    logging.getLogger("azure").setLevel(logging.WARNING)

    from shared.platform.storage.clients import host_storage
    from shared.wiring.settings import Settings

    # Only the IaC section: a job verifies no tokens, so the host's auth settings are not its to need.
    iac = Settings().runtime_cloud.iac
    if args.command == "scale":
        from runner_job.scaler import scale

        return scale(host_storage, iac)
    if args.command == "serve":
        from runner_job.serve import Scrub, serve

        remake = tuple(Path(os.environ[name]) for name in _REMADE if os.environ.get(name))
        return serve(host_storage, iac, Scrub(tuple(args.wipe), remake, args.reap_user), args.runs)
    from runner_job.job import parse_request, run_request  # the scaler imports them on its first request only
    from shared.platform import telemetry

    telemetry.configure()  # as the host's: Application Insights, or OTLP JSON lines locally
    storage = host_storage()
    try:
        if args.command == "run":
            run_request(parse_request(args.request), storage)
        else:
            from runner_job.scaler import take_one

            taken = take_one(storage, iac)
            if taken is not None:  # the request leaves the queue once the job claimed its row
                run_request(taken.request, storage, claimed=lambda: taken.release(storage))
    finally:
        telemetry.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
