"""``python -m runtime_cloud_cli``: the same as the ``runtime-cloud`` command."""

from __future__ import annotations

from runtime_cloud_cli.app import main

main()
