"""The package version (read by the CLI and written into outputs)."""

__version__ = "0.1.0"
