"""The Runtime Cloud host's own package: the domain and its adapters."""

__version__ = "0.1.0"
