"""Warm runners: ``runnerJobWarmReplicas`` runners kept ready beside the queue-scaled job.

A Container App (``rtcloud-<stack>-warm``) in the jobs' environment, with
exactly that many replicas (min = max: never scaled to zero, never more), each
running ``python -m runner_job serve``: it takes requests from the same
``runner-jobs`` queue one at a time, runs each in a child process of its own
session, then ends that session's processes and wipes what the runner user
wrote (runner_job/serve.py says exactly what). A request a warm runner takes
is hidden, so the job's scale rule (``visibleonly``) starts no execution for
it; requests that find every warm runner busy start executions as before.

Same image, same environment variables, and **the runner identity only**, as
the job: a warm runner runs tenants' programs too. No ingress: it listens on
nothing. The trade-off against an execution per request is isolation between
runs (docs/provisioning.md, "Where the runners run": warm runners).
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi
from pulumi_azure_native import app

from runtime_cloud_infra.settings import StackSettings

TIMEOUT_VARIABLE = "RUNNER_JOB_TIMEOUT_SECONDS"  # runner_job/serve.py reads it (infra imports none of the app)
SERVE_COMMAND = [
    "python",
    "-m",
    "runner_job",
    "serve",
    "--reap-user",
    "--wipe",
    "/home/runner",
    "--wipe",
    "/tmp",
    "--wipe",
    "/dev/shm",
]


def warm_runners(
    settings: StackSettings,
    resource_group: pulumi.Input[str],
    environment: app.ManagedEnvironment,
    runner_identity_id: pulumi.Input[str],
    env: Mapping[str, pulumi.Input[str]],
) -> app.ContainerApp | None:
    """The warm runners' Container App, or None when the stack asks for none."""
    job = settings.runner_job
    if job.warm_replicas == 0:
        return None
    return app.ContainerApp(
        "runner-warm",
        container_app_name=settings.name("warm"),
        resource_group_name=resource_group,
        location=settings.location,
        managed_environment_id=environment.id,
        workload_profile_name="Consumption",
        identity={"type": "UserAssigned", "user_assigned_identities": [runner_identity_id]},
        configuration={
            "active_revisions_mode": "Single",
            "registries": ([{"server": job.registry, "identity": runner_identity_id}] if job.registry else None),
        },
        template={
            "containers": [
                {
                    "name": "runner-warm",
                    "image": job.image,
                    "command": SERVE_COMMAND,
                    "env": [
                        *({"name": name, "value": value} for name, value in sorted(env.items())),
                        # A warm runner has no replica timeout: it ends a run that outlives the job's itself.
                        {"name": TIMEOUT_VARIABLE, "value": str(job.timeout_seconds)},
                    ],
                    "resources": {"cpu": job.cpu, "memory": job.memory},
                }
            ],
            "scale": {"min_replicas": job.warm_replicas, "max_replicas": job.warm_replicas},
        },
        tags=settings.tags,
    )
