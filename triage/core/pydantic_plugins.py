"""No pydantic plugin discovery in triage's own process, without telling the processes it starts.

The first time pydantic builds a validator (typer builds one per option of the command, so
every run does) it imports `importlib.metadata` and reads the entry points of every installed
distribution, looking for plugins: 15-20 ms of a 10 KB log's run, more with many packages.
No plugin is meant for triage's own models; typer itself turns discovery off while it builds
its validators.

`PYDANTIC_DISABLE_PLUGINS` would skip the reading but not the import, and it would be inherited
by every process triage starts: `triage run` starts the inference server, whose own pydantic
plugins (tracing, for one) must keep working. So the CLI puts a stand-in for pydantic's private
loader module in `sys.modules` before anything imports it. The stand-in answers `get_plugins()`
with no plugins, as the real one does when discovery is disabled, and hands any other name to
the real module, imported then: a pydantic that asks its loader for something new still gets it.

A user who sets `PYDANTIC_DISABLE_PLUGINS` (even to an empty value, to have plugins loaded)
gets pydantic's own loader, which honours it.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from typing import Any

LOADER = "pydantic.plugin._loader"


def skip_discovery() -> bool:
    """Put the stand-in in place, unless the user decides through the variable or the real
    loader is imported already; True when it was put in place."""
    if "PYDANTIC_DISABLE_PLUGINS" in os.environ or LOADER in sys.modules:
        return False
    sys.modules[LOADER] = stand_in()
    return True


def stand_in() -> types.ModuleType:
    """A module with pydantic's loader's `get_plugins`, finding none."""
    module = types.ModuleType(LOADER, "triage's stand-in for pydantic's plugin loader (triage.core.pydantic_plugins)")

    def get_plugins() -> tuple[()]:
        return ()

    def __getattr__(name: str) -> Any:  # noqa: ANN401, N807 - PEP 562: a name the stand-in lacks
        if name.startswith("__"):  # the import system asks a module for `__path__` and the like
            raise AttributeError(name)
        return getattr(real_loader(), name)

    module.get_plugins = get_plugins  # type: ignore[attr-defined]
    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    return module


def real_loader() -> types.ModuleType:
    """pydantic's own loader module, imported in the stand-in's place if it is not yet."""
    current = sys.modules.get(LOADER)
    if current is not None and "__file__" in vars(current):  # not the stand-in (no getattr: it would ask itself)
        return current
    sys.modules.pop(LOADER, None)
    return importlib.import_module(LOADER)
