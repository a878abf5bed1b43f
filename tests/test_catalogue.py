"""The catalogue checks itself: schema errors name file, line and field; examples run."""

import textwrap

import pytest
from conftest import FIXTURES, analyze_json, run_cli

from triage.catalogue.load import load_catalogue, load_signature
from triage.commands.catalogue.check import check
from triage.core.errors import CatalogueError

GOOD = textwrap.dedent("""\
    id: user-frobnicator-overflow
    title: The frobnicator overflowed its buffer
    engine: sglang
    severity: crash
    keywords: [frobnicator overflow]
    patterns:
      - 'RuntimeError: frobnicator overflow at stage \\d+'
    explanation: |
      The frobnicator keeps a fixed buffer per batch; a batch over the limit overflows it.
    workarounds: [sglang-lower-max-running-requests]
    references: [https://github.com/sgl-project/sglang/issues/1]
    open_issue: https://github.com/sgl-project/sglang/issues/1
    examples:
      match:
        - "RuntimeError: frobnicator overflow at stage 3"
      no_match:
        - "RuntimeError: frobnicator underflow at stage 3"
    """)


def write(tmp_path, name, text):
    d = tmp_path / "cat" / "signatures"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text)
    return tmp_path / "cat"


def test_builtin_catalogue_is_clean_and_big_enough():
    problems, summary = check(None, [], verbose=False)
    assert problems == 0, summary
    cat = load_catalogue()
    engines = [s.spec.engine for s in cat.signatures.values()]
    assert len(engines) >= 60
    assert engines.count("sglang") >= 20 and engines.count("vllm") >= 20
    assert engines.count("trtllm") + engines.count("tgi") >= 5
    assert engines.count("any") >= 15


def test_every_signature_has_reference_examples_and_workaround(catalogue):
    for s in catalogue.signatures.values():
        assert s.spec.references and s.spec.examples.match and s.spec.examples.no_match, s.spec.id
        for wid in s.spec.workarounds:
            w = catalogue.workarounds[wid]
            assert w.cost and (w.flags.add or w.flags.remove or w.env or w.action)


def test_user_catalogue_round_trip(tmp_path):
    root = write(tmp_path, "frob.yaml", GOOD)
    problems, summary = check([str(root)], [], verbose=False)
    assert problems == 0, summary
    log = tmp_path / "s.log"
    log.write_text("[2025-01-01 00:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
                   '  File "/x/frob.py", line 1, in f\n    g()\n'
                   "RuntimeError: frobnicator overflow at stage 7\n")
    code, d = analyze_json(log, "--catalogue", str(root))
    assert code == 1 and d["findings"][0]["signature"] == "user-frobnicator-overflow"


@pytest.mark.parametrize("mutate,expect", [
    (lambda t: t.replace("severity: crash", "severity: fatal"), ":4: field 'severity'"),
    (lambda t: t.replace("keywords: [frobnicator overflow]", "keywords: frobnicator"), "field 'keywords'"),
    (lambda t: t.replace("stage \\d+'", "stage (\\d+'"), "invalid regex"),
    (lambda t: t.replace("patterns:", "bad: [unclosed\npatterns:", 1), "invalid YAML"),
    (lambda t: t + "extra_field: 1\n", "field 'extra_field'"),
    (lambda t: t.replace("references: [https://github.com/sgl-project/sglang/issues/1]", "references: [somewhere]"), ":11: field 'references'"),
])
def test_schema_errors_name_file_line_and_field(tmp_path, mutate, expect):
    root = write(tmp_path, "bad.yaml", mutate(GOOD))
    with pytest.raises(CatalogueError) as e:
        load_signature(root / "signatures" / "bad.yaml")
    assert "bad.yaml" in str(e.value) and expect in str(e.value)


def test_check_reports_keyword_missing_from_pattern(tmp_path):
    root = write(tmp_path, "k.yaml", GOOD.replace("keywords: [frobnicator overflow]", "keywords: [stage overflow]"))
    problems, summary = check([str(root)], [], verbose=False)
    assert problems and "contains none of the keywords" in summary


def test_check_reports_catastrophic_pattern(tmp_path):
    root = write(tmp_path, "c.yaml", GOOD.replace("'RuntimeError: frobnicator overflow at stage \\d+'",
                                                  "'frobnicator overflow(\\s*a+)+x'"))
    problems, summary = check([str(root)], [], verbose=False)
    assert problems and "backtrack" in summary


def test_check_reports_failing_examples_and_unknown_flags(tmp_path):
    root = write(tmp_path, "e.yaml", GOOD.replace('- "RuntimeError: frobnicator underflow at stage 3"',
                                                  '- "RuntimeError: frobnicator overflow at stage 9"'))
    wk = root / "workarounds"
    wk.mkdir()
    (wk / "w.yaml").write_text("id: user-bogus\nengine: sglang\ntitle: Bogus flag\nflags: {add: [--no-such-flag]}\n"
                               "cost: Nothing at all, it does not exist.\n")
    problems, summary = check([str(root)], [], verbose=False)
    assert "no_match[0] is matched" in summary
    assert "--no-such-flag does not exist" in summary


def test_every_workaround_says_whether_it_is_automatic(tmp_path):
    """A missing `auto:` loads as "not automatic" but is a check problem; `auto: true` is refused
    on a workaround with an action (a step outside the launch command)."""
    root = write(tmp_path, "frob.yaml", GOOD)
    wk = root / "workarounds"
    wk.mkdir()
    (wk / "w.yaml").write_text("id: user-flag\nengine: sglang\ntitle: A flag\nflags: {add: [--disable-radix-cache]}\n"
                               "cost: Prefill of shared prefixes is recomputed.\n")
    cat = load_catalogue([str(root)])
    assert cat.workarounds["user-flag"].auto is None and not cat.workarounds["user-flag"].automatic
    problems, summary = check([str(root)], [], verbose=False)
    assert problems == 1 and "user-flag: missing 'auto: true|false'" in summary, summary
    (wk / "w.yaml").write_text("id: user-drain\nengine: any\ntitle: Drain the node\nauto: true\n"
                               "action: Cordon and drain the node.\ncost: The node's capacity is lost.\n")
    with pytest.raises(CatalogueError, match=r"w.yaml:1: .*auto: true is only for a workaround that changes flags or env"):
        load_catalogue([str(root)])
    for wid, w in load_catalogue().workarounds.items():
        assert w.auto is not None, wid
        assert not (w.automatic and w.action), wid


def test_duplicate_ids_and_unknown_workarounds(tmp_path):
    root = write(tmp_path, "a.yaml", GOOD)
    (root / "signatures" / "b.yaml").write_text(GOOD)
    with pytest.raises(CatalogueError, match="duplicate signature id"):
        load_catalogue([str(root)])
    (root / "signatures" / "b.yaml").unlink()
    (root / "signatures" / "a.yaml").write_text(GOOD.replace("sglang-lower-max-running-requests", "nope"))
    with pytest.raises(CatalogueError, match="unknown workaround id 'nope'"):
        load_catalogue([str(root)])


def test_yaml_aliases_are_refused(tmp_path):
    bomb = "a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\n"
    root = write(tmp_path, "bomb.yaml", bomb)
    with pytest.raises(CatalogueError, match="aliases"):
        load_signature(root / "signatures" / "bomb.yaml")


def test_catalogue_check_cli_exit_codes(tmp_path):
    p = run_cli("catalogue", "check", "-q")
    assert p.returncode == 0, p.stdout.decode()[-2000:]
    root = write(tmp_path, "bad.yaml", GOOD.replace("severity: crash", "severity: fatal"))
    p = run_cli("catalogue", "check", str(root))
    assert p.returncode == 1 and b"FAIL" in p.stdout


def test_debug_recipe_shown_in_report():
    p = run_cli("analyze", str(FIXTURES / "sglang-illegal-address.log.gz"))
    assert b"CUDA_LAUNCH_BLOCKING=1" in p.stdout
