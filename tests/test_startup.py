"""Start-up work deferred or cached: lazy patterns, the precompiled report template."""

from __future__ import annotations

import copy
import pickle
import re
import subprocess
import sys
from pathlib import Path

from triage.core.lazyre import LazyPattern, lazy, lazy_regex

ROOT = Path(__file__).resolve().parents[1]


def test_lazy_pattern_compiles_on_first_use_and_behaves_like_the_pattern() -> None:
    rx = lazy(r"(?P<n>\d+) reqs")
    assert isinstance(rx, LazyPattern) and "search" not in vars(rx)
    assert rx.pattern == r"(?P<n>\d+) reqs"  # readable without compiling
    assert "search" not in vars(rx)
    real = re.compile(r"(?P<n>\d+) reqs")
    text = "Running: 12 reqs, Waiting: 3 reqs"
    assert rx.search(text).group("n") == "12"
    assert "search" in vars(rx)  # bound once compiled
    assert rx.findall(text) == real.findall(text)
    assert rx.sub("N", text) == real.sub("N", text)
    assert [m.span() for m in rx.finditer(text)] == [m.span() for m in real.finditer(text)]
    assert rx.groupindex == real.groupindex and rx.flags == real.flags
    assert copy.deepcopy(rx) is rx
    assert pickle.loads(pickle.dumps(lazy(r"a+"))).findall("aa b a") == ["aa", "a"]


def test_lazy_regex_and_bytes_patterns() -> None:
    assert lazy_regex(r"\p{Lu}+").findall("abc DEF") == ["DEF"]
    assert lazy(rb"#running-req: (\d+)").findall(b"#running-req: 7, #running-req: 9") == [b"7", b"9"]


def test_precompiled_template_is_up_to_date() -> None:
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile_template.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr


def test_compiled_feature_map_is_up_to_date_and_used() -> None:
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "compile_features.py"), "--check"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    from triage.catalogue.features import _compiled, feature_map

    assert _compiled() is not None
    fast, checked = feature_map(), feature_map(validate=True)
    assert {e: [f.raw for f in fs] for e, fs in fast.items()} == {e: [f.raw for f in fs] for e, fs in checked.items()}


def test_precompiled_template_renders_what_the_template_renders(monkeypatch) -> None:
    from triage.catalogue.load import load_catalogue
    from triage.pipeline.analyze import Options, analyze_file
    from triage.render import markdown

    cat = load_catalogue([])
    logs = sorted((ROOT / "examples").rglob("*.log"))[:6]
    assert logs
    markdown._template.cache_clear()
    assert markdown._template().filename.endswith("report_template.py")  # the precompiled one is used
    fresh = markdown._env().get_template(markdown.TEMPLATE.name)
    for log in logs:
        r = analyze_file(str(log), cat, Options(workers=1))
        out = markdown.render_markdown(r)
        with monkeypatch.context() as m:
            m.setattr(markdown, "_template", lambda: fresh)
            assert markdown.render_markdown(r) == out, log


def test_stale_precompiled_template_is_not_used(monkeypatch) -> None:
    from triage.render import markdown, report_template

    monkeypatch.setattr(report_template, "TEMPLATE_SHA256", "0" * 64)
    markdown._template.cache_clear()
    try:
        tpl = markdown._template()
        assert tpl.filename is not None and tpl.filename.endswith("report.md.j2")  # loaded from the file
    finally:
        markdown._template.cache_clear()


def _python(code: str, **env: str) -> list[str]:
    """`code` run in a fresh interpreter, with PYDANTIC_DISABLE_PLUGINS as `env` says; its output lines."""
    import os

    e = {k: v for k, v in os.environ.items() if k != "PYDANTIC_DISABLE_PLUGINS"} | env
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


_VALIDATE = ("from triage.core.pydantic_plugins import skip_discovery; print(skip_discovery()); "
             "from pydantic import TypeAdapter; assert TypeAdapter(int).validate_python('7') == 7; "
             "import sys; print('importlib.metadata' in sys.modules)")


def test_no_plugin_discovery_in_triages_process() -> None:
    # the stand-in keeps pydantic from importing importlib.metadata (15-20 ms of a small run);
    # if a pydantic asked its loader for more than get_plugins, the import would show here
    assert _python(_VALIDATE) == ["True", "False"]


def test_the_users_pydantic_disable_plugins_is_left_to_pydantic() -> None:
    assert _python(_VALIDATE, PYDANTIC_DISABLE_PLUGINS="")[0] == "False"
    assert _python(_VALIDATE, PYDANTIC_DISABLE_PLUGINS="__all__")[0] == "False"


def test_the_stand_in_finds_no_plugins_and_hands_other_names_to_pydantic() -> None:
    code = ("import sys; from triage.core import pydantic_plugins as p; p.skip_discovery(); "
            "m = sys.modules[p.LOADER]; print(list(m.get_plugins())); print(hasattr(m, '__path__')); "
            "print(m.PYDANTIC_ENTRY_POINT_GROUP); print(sys.modules[p.LOADER] is not m)")
    assert _python(code) == ["[]", "False", "pydantic", "True"]


def test_the_cli_sets_no_variable_that_the_processes_it_starts_would_inherit(tmp_path, monkeypatch) -> None:
    # `triage run` starts the server with triage's environment: its pydantic plugins must work
    import os

    from triage.cli import run_main

    monkeypatch.delenv("PYDANTIC_DISABLE_PLUGINS", raising=False)
    log = tmp_path / "x.log"
    log.write_text("INFO server started\n", encoding="utf-8")
    assert run_main(["analyze", "--format", "json", str(log)]) == 0
    assert "PYDANTIC_DISABLE_PLUGINS" not in os.environ
