"""Pulumi entry point: `pulumi up` in this folder (or `make deploy`). Everything is in runtime_cloud_infra/."""

from runtime_cloud_infra import deploy

deploy()
