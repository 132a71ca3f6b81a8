"""Operator and developer tools (python -m tools.<name>)."""
