"""The engines' CLI flags (shipped facts): does a flag exist, in which versions, what replaced it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from triage.core.lazymap import LazyMap

if TYPE_CHECKING:
    from packaging.version import Version

DATA = Path(__file__).resolve().parent / "data" / "flags"



@dataclass(frozen=True)
class FlagInfo:
    """One engine flag: its names, destination, value, and the versions it exists in."""

    flag: str
    dest: str
    takes_value: bool | None
    first_seen: str | None = None
    removed_in: str | None = None
    last_seen: str | None = None
    deprecated_in: str | None = None
    replacement: str | None = None
    aliases: tuple[str, ...] = ()
    default: object = None


def _ver(s: str | None) -> Version | None:
    if not s:
        return None
    from packaging.version import InvalidVersion, Version  # only when a version is compared

    try:
        return Version(s.lstrip("<=v"))
    except InvalidVersion:
        return None


def flag_name(spec: str) -> str:
    """`--mem-fraction-static 0.8` / `--exit-on-error=false` -> the bare flag."""
    return spec.strip().split()[0].split("=", 1)[0]


class FlagIndex:
    """An engine's flags by name (aliases too) and by destination; each FlagInfo is made the
    first time it is looked up: an engine lists hundreds and a run looks at a handful (making
    all 700 of SGLang's was 4 ms)."""

    def __init__(self, engine: str, entries: list[dict], version: str | None) -> None:
        self.engine = engine
        self.version = version
        self._entries = entries
        self._made: dict[int, FlagInfo] = {}
        names: LazyMap[FlagInfo] = LazyMap(self._info)
        dests: LazyMap[FlagInfo] = LazyMap(self._info)
        for i, e in enumerate(entries):  # the first entry of a name wins, as before
            name = e["flag"]
            for key in (name, *(e.get("aliases") or ()), *(e.get("hidden_aliases") or ())):
                if key not in names:
                    names.later(key, i)
            dest = e.get("dest") or name.lstrip("-").replace("-", "_")
            if dest not in dests:
                dests.later(dest, i)
        self.by_name: Mapping[str, FlagInfo] = names
        self.by_dest: Mapping[str, FlagInfo] = dests

    def _info(self, i: int) -> FlagInfo:
        info = self._made.get(i)
        if info is None:
            e = self._entries[i]
            name = e["flag"]
            info = self._made[i] = FlagInfo(
                flag=name,
                dest=e.get("dest") or name.lstrip("-").replace("-", "_"),
                takes_value=e.get("takes_value"),
                first_seen=e.get("first_seen") or None,
                removed_in=e.get("removed_in") or None,
                last_seen=e.get("last_seen") or None,
                deprecated_in=e.get("deprecated_in") or None,
                replacement=e.get("replacement") or None,
                aliases=tuple(e.get("aliases") or ()) + tuple(e.get("hidden_aliases") or ()),
                default=e.get("default"),
            )
        return info

    def get(self, flag: str) -> FlagInfo | None:
        name = flag_name(flag)
        info = self.by_name.get(name)
        if info is None and self.engine == "vllm":
            info = self.by_name.get(name.replace("_", "-"))  # vLLM accepts underscores
        if info is None and name.startswith("--no-"):
            info = self.by_name.get("--" + name[5:])
        if info is None and name.startswith("--") and len(name) > 3:
            # argparse's allow_abbrev: a unique prefix of a current flag is that flag
            cands = {i.flag for n in self.by_name if n.startswith(name) and not (i := self.by_name[n]).removed_in}
            if len(cands) == 1:
                info = self.by_name[cands.pop()]
        return info

    def exists(self, flag: str) -> bool:
        return self.get(flag) is not None

    def status(self, flag: str, version: str | None) -> tuple[str, str | None]:
        """('ok' | 'unknown' | 'removed' | 'not-yet' | 'deprecated', detail) for a version."""
        info = self.get(flag)
        if info is None:
            return "unknown", None
        v = _ver(version)
        if v is None:
            if info.removed_in:
                repl = f"; from {info.removed_in} on use {info.replacement}" if info.replacement else ""
                return "removed", f"{info.flag} exists only up to {info.last_seen or '?'} (removed in {info.removed_in}){repl}"
            if info.deprecated_in:
                return "deprecated", (f"{info.flag} is deprecated since {info.deprecated_in}; "
                                      f"use {info.replacement} from {info.deprecated_in} on")
            return "ok", None
        first = _ver(info.first_seen)
        if first is not None and v < first and not (info.first_seen or "").startswith("<="):
            return "not-yet", f"{info.flag} first appeared in {info.first_seen}"
        removed = _ver(info.removed_in)
        if removed is not None and v >= removed:
            repl = f"; use {info.replacement}" if info.replacement else ""
            return "removed", f"{info.flag} was removed in {info.removed_in}{repl}"
        dep = _ver(info.deprecated_in)
        if dep is not None and v >= dep:
            return "deprecated", f"{info.flag} is deprecated since {info.deprecated_in}; use {info.replacement}"
        return "ok", None


@cache
def flag_index(engine: str) -> FlagIndex | None:
    js, ym = DATA / f"{engine}.json", DATA / f"{engine}.yaml"
    if js.exists():  # generated lists (large) are JSON for speed; hand-written ones YAML
        import json

        doc = json.loads(js.read_text(encoding="utf-8"))
    elif ym.exists():
        import yaml  # only the hand-written lists; SGLang's and vLLM's are JSON

        doc = yaml.load(ym.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    else:
        return None
    return FlagIndex(engine, doc.get("flags") or [], doc.get("version"))
