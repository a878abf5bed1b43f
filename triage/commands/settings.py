"""Defaults from configuration: `triage.toml`, `[tool.triage]` in pyproject.toml, the user's
config file, and `TRIAGE_*` environment variables.

Precedence, as ruff documents it: command-line options, then environment variables, then the
nearest configuration file (searched from the current directory upwards; in one directory
`triage.toml` before `pyproject.toml`, which counts only with a `[tool.triage]` table), and
only when there is none, the user's `$XDG_CONFIG_HOME/triage/triage.toml`. Catalogue
directories add up instead: the file's, then TRIAGE_CATALOGUE's, then `-c`'s.
Relative catalogue paths in a file are relative to that file.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from triage.core.errors import TriageError

# key in a file -> (environment variable, type)
KEYS: dict[str, tuple[str, type]] = {
    "catalogue": ("TRIAGE_CATALOGUE", list),
    "format": ("TRIAGE_FORMAT", str),
    "redact": ("TRIAGE_REDACT", bool),
    "redact-ips": ("TRIAGE_REDACT_IPS", bool),
    "jobs": ("TRIAGE_JOBS", int),
    "exit-zero": ("TRIAGE_EXIT_ZERO", bool),
}
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off", ""}


@dataclass
class Settings:
    """The settings in force, from the environment and the configuration file (`get` lets the command line win)."""

    values: dict[str, Any] = field(default_factory=dict)
    catalogue: list[str] = field(default_factory=list)
    file: Path | None = None  # the configuration file used, if any

    def get(self, key: str, cli: Any, default: Any) -> Any:
        """The command line's value if given, else the configured one, else the default."""
        if cli is not None:
            return cli
        return self.values.get(key, default)

    def catalogues(self, cli: list[Path] | None) -> list[str]:
        return self.catalogue + [str(p) for p in cli or []]


def user_config() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "triage" / "triage.toml"


def _table(path: Path) -> dict[str, Any] | None:
    """The triage settings a file holds, or None when it holds none (a pyproject.toml without
    `[tool.triage]`)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TriageError(f"{path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    if path.name == "pyproject.toml" and not _may_name_triage(text):
        return None  # no [tool.triage] can be in it: not worth importing a TOML parser for
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise TriageError(f"{path}: not valid TOML ({e})") from None
    except RecursionError:  # the parser recurses per level: `a = [[[[...` 5000 deep
        raise TriageError(f"{path}: not valid TOML (nested too deeply)") from None
    if path.name == "pyproject.toml":
        tool = data.get("tool", {})
        return tool.get("triage") if isinstance(tool, dict) and isinstance(tool.get("triage"), dict) else None
    return data


def _may_name_triage(text: str) -> bool:
    """Whether a pyproject.toml can hold a `tool.triage` table, read cheaply: a table header or a
    key whose full dotted name starts `tool.triage`. Most files that mention triage do so as a
    value (a dependency) or as another table's key (`[project.scripts] triage = ...`, in
    triage's own). Anything this reading cannot follow (a multi-line string, an inline table)
    answers True, and the file is parsed."""
    if "triage" not in text:
        return False
    if '"""' in text or "'''" in text:
        return True
    table = ""
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("["):
            table = _dotted(s.lstrip("[").split("]")[0])
            if table.startswith("tool.triage"):
                return True
            continue
        at = s.find("triage")
        if at < 0:
            continue
        key, eq, value = s.partition("=")
        if "triage" in key and _dotted(f"{table}.{key}" if table else key).startswith("tool.triage"):
            return True
        if eq and "{" in value[: value.find("triage")]:
            return True
    return False


def _dotted(name: str) -> str:
    return "".join(ch for ch in name if ch not in " \t\"'")


def find_config(start: Path) -> tuple[Path, dict[str, Any]] | None:
    for d in (start, *start.parents):
        for name in ("triage.toml", "pyproject.toml"):
            p = d / name
            if p.is_file():
                table = _table(p)
                if table is not None:
                    return p, table
    p = user_config()
    if p.is_file():
        return p, _table(p) or {}
    return None


def _refused(key: str, value: Any) -> str | None:  # noqa: ANN401
    """Why a value of the right type is still wrong (what the option itself would refuse), so
    that the error names where it came from, not an option the user never gave."""
    if key == "format" and str(value).lower() not in ("markdown", "md", "json"):
        return "expected markdown (or md) or json"
    if key == "jobs" and value < 0:
        return "expected 0 (one per core) or more"
    return None


def _check(key: str, value: Any, where: str) -> Any:
    want = KEYS[key][1]
    if want is list:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise TriageError(f"{where}: {key} must be a list of directories")
        return value
    if want is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise TriageError(f"{where}: {key} must be a whole number")
    if want is not int and not isinstance(value, want):
        raise TriageError(f"{where}: {key} must be {'true or false' if want is bool else 'a string'}")
    why = _refused(key, value)
    if why:
        raise TriageError(f"{where}: {key} = {value!r}: {why}")
    return value


def _from_env(key: str, raw: str) -> Any:
    env, want = KEYS[key]
    if want is list:
        return [p for p in raw.split(os.pathsep) if p]
    if want is bool:
        if raw.lower() not in _TRUE | _FALSE:
            raise TriageError(f"{env}={raw}: expected 1 or 0 (true or false)")
        return raw.lower() in _TRUE
    if want is int:
        try:
            value: Any = int(raw)
        except ValueError:
            raise TriageError(f"{env}={raw}: expected a whole number") from None
    else:
        value = raw
    why = _refused(key, value)
    if why:
        raise TriageError(f"{env}={raw}: {why}")
    return value


def load_settings(cwd: Path | None = None, env: Mapping[str, str] | None = None, config: Path | None = None,
                  isolated: bool = False) -> Settings:
    """`config`: this file instead of searching; `isolated`: no file at all (environment only)."""
    environ = os.environ if env is None else env
    s = Settings()
    found: tuple[Path, dict[str, Any]] | None = None
    if config is not None:
        if not config.is_file():
            raise TriageError(f"--config {config}: no such file")
        found = (config, _table(config) or {})
    elif not isolated:
        found = find_config((cwd or Path.cwd()).resolve())
    if found is not None:
        s.file, table = found
        for key, value in table.items():
            if key not in KEYS:
                raise TriageError(f"{s.file}: unknown setting {key!r} (known: {', '.join(KEYS)})")
            value = _check(key, value, str(s.file))
            if key == "catalogue":
                s.catalogue = [str((s.file.parent / v).resolve()) for v in value]
            else:
                s.values[key] = value
    for key, (name, _) in KEYS.items():
        raw = environ.get(name)
        if raw is None:
            continue
        if key == "catalogue":
            s.catalogue += _from_env(key, raw)
        else:
            s.values[key] = _from_env(key, raw)
    return s
