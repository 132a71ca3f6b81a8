"""The command groups of ``runtime-cloud``: one module per area of the API."""
