"""triage's release version: one place, read by `triage --version`, the JSON envelope and
`triage.__version__` (pyproject.toml states the same string; docs/release.md)."""

__version__ = "0.1.0"
