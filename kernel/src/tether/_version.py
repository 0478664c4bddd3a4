"""The kernel's version; kept equal to ``kernel/pyproject.toml`` by a test."""

__version__ = "0.1.0"
