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
