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


# What every entry must carry. The old test asserted these on the loaded catalogue, which the
# schema had already enforced while loading it, so it could not fail; these remove each one from
# a valid entry and expect the loader to refuse it.
WK_GOOD = ("id: user-shrink-batch\nengine: sglang\ntitle: Shrink the batch\nauto: false\n"
           "flags: {add: [--max-running-requests=64]}\ncost: Lower throughput at peak load.\n")


@pytest.mark.parametrize("mutate,field", [
    (lambda t: t.replace("references: [https://github.com/sgl-project/sglang/issues/1]\n", ""), "references"),
    (lambda t: t.replace("references: [https://github.com/sgl-project/sglang/issues/1]", "references: []"),
     "references"),
    (lambda t: t.replace('    - "RuntimeError: frobnicator overflow at stage 3"', "    []").replace("match:\n    []",
                                                                                                "match: []"), "match"),
    (lambda t: t.replace('  no_match:\n    - "RuntimeError: frobnicator underflow at stage 3"\n', ""), "no_match"),
    (lambda t: t.replace("workarounds: [sglang-lower-max-running-requests]", "workarounds: []"), "workarounds"),
], ids=["no-references", "empty-references", "empty-match", "no-no_match", "no-workaround"])
def test_signature_without_references_examples_or_workaround_is_refused(tmp_path, mutate, field):
    text = mutate(GOOD)
    assert text != GOOD
    root = write(tmp_path, "bad.yaml", text)
    with pytest.raises(CatalogueError, match=rf"bad\.yaml:\d+: .*{field}"):
        load_signature(root / "signatures" / "bad.yaml")


@pytest.mark.parametrize("mutate,says", [
    (lambda t: t.replace("cost: Lower throughput at peak load.\n", ""), "cost"),
    (lambda t: t.replace("cost: Lower throughput at peak load.", "cost: some"), "cost"),
    (lambda t: t.replace("flags: {add: [--max-running-requests=64]}\n", ""), "flags, env or an action"),
], ids=["no-cost", "short-cost", "no-change"])
def test_workaround_without_cost_or_change_is_refused(tmp_path, mutate, says):
    from triage.catalogue.load import load_workaround

    load_workaround(_write_wk(tmp_path, "good.yaml", WK_GOOD))  # the unmutated entry loads
    text = mutate(WK_GOOD)
    assert text != WK_GOOD
    with pytest.raises(CatalogueError, match=rf"bad\.yaml:\d+: .*{says}"):
        load_workaround(_write_wk(tmp_path, "bad.yaml", text))


def _write_wk(tmp_path, name, text):  # noqa: ANN001, ANN202
    d = tmp_path / "cat" / "workarounds"
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text)
    return d / name


def test_every_builtin_workaround_is_offered_by_a_signature(catalogue):
    """A workaround no signature lists is never shown to anyone: dead catalogue text (often a
    signature's list that lost it in an edit)."""
    offered = {wid for s in catalogue.signatures.values() for wid in s.spec.workarounds}
    assert not sorted(set(catalogue.workarounds) - offered)


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
    # a small catalogue: the built-in one is checked (once, it takes seconds) by the library test above
    p = run_cli("catalogue", "check", "-q", str(write(tmp_path / "good", "frob.yaml", GOOD)))
    assert p.returncode == 0, p.stdout.decode()[-2000:]
    assert b"1 signatures" in p.stdout and b"0 problems" in p.stdout
    root = write(tmp_path, "bad.yaml", GOOD.replace("severity: crash", "severity: fatal"))
    p = run_cli("catalogue", "check", str(root))
    assert p.returncode == 1 and b"FAIL" in p.stdout


def test_fixed_in_names_a_release_and_the_pr_goes_in_fix_pr(tmp_path):
    """The report says "upgrade to SGLang 0.5.13 or later (PR #27038)": a URL in fixed_in gives the
    on-call engineer no version to ask for, and a PR without a release says nothing of when."""
    url = "https://github.com/sgl-project/sglang/pull/27038"
    as_url = GOOD.replace("open_issue: https://github.com/sgl-project/sglang/issues/1", f"fixed_in: {url}")
    p = run_cli("catalogue", "check", str(write(tmp_path / "a", "frob.yaml", as_url)))
    assert p.returncode == 1 and b"is a URL: give the first release" in p.stdout
    pr_only = GOOD.replace("open_issue: https://github.com/sgl-project/sglang/issues/1", f"no_upstream_fix: x\nfix_pr: {url}")
    p = run_cli("catalogue", "check", str(write(tmp_path / "b", "frob.yaml", pr_only)))
    assert p.returncode == 1 and b"fix_pr without fixed_in" in p.stdout
    good = GOOD.replace("open_issue: https://github.com/sgl-project/sglang/issues/1",
                        f'fixed_in: "0.5.13"\nfix_pr: {url}\naffects: "<0.5.13"')
    p = run_cli("catalogue", "check", "-q", str(write(tmp_path / "c", "frob.yaml", good)))
    assert p.returncode == 0 and b"1 with the release that fixes them" in p.stdout


def test_debug_recipe_shown_in_report():
    p = run_cli("analyze", str(FIXTURES / "sglang-illegal-address.log.gz"))
    assert b"CUDA_LAUNCH_BLOCKING=1" in p.stdout
