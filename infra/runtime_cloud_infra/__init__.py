"""The Runtime Cloud host's infrastructure as a Pulumi program (pulumi-azure-native).

``infra/__main__.py`` only calls :func:`deploy`; the resources are declared in
the modules beside this one, so that tests can run them against a mocked
Pulumi engine (``tests/infra/``). The function app never imports this package.
"""

from __future__ import annotations

from runtime_cloud_infra import settings as stack_settings
from runtime_cloud_infra.stack import Stack, build, export


def deploy() -> Stack:
    """Read the stack's configuration, declare every resource, export what the next steps need."""
    configuration = stack_settings.load()
    stack = build(configuration)
    export(stack, configuration)
    return stack
