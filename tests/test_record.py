"""The report's dataclasses (triage/core/record.py): their dump is the JSON contract, pydantic
still validates outside data against them, and the redaction's rebuild keeps their shape."""

from __future__ import annotations

import pydantic
import pytest
from conftest import FIXTURES

import triage
from triage.core.models import Environment, Evidence, Failure, Finding, Frame, Report, Workaround
from triage.core.record import rebuilt_like


def _report() -> Report:
    return triage.analyze(str(FIXTURES / "sglang-nsa-tp8.log"))


def test_the_dump_leaves_hidden_fields_out_and_adds_computed_ones():
    r = Report(source="x", environment=Environment(launch_args=["--api-key", "k"], launch_settings={"a": 1}),
               diagnostics=["portable scanner"])
    d = r.model_dump()
    assert "diagnostics" not in d and "launch_args" not in d["environment"] and "launch_settings" not in d["environment"]
    assert list(d)[-1] == "exit_code" and d["exit_code"] == 0
    r.failures.append(Failure(kind="traceback", exception="RuntimeError", line=3))
    assert r.model_dump()["exit_code"] == 1


def test_json_mode_turns_tuples_into_lists():
    r = Report(source="x", environment=Environment(settings={"pair": (1, 2)}))
    assert r.model_dump()["environment"]["settings"]["pair"] == (1, 2)
    assert r.model_dump(mode="json")["environment"]["settings"]["pair"] == [1, 2]


def test_pydantic_validates_outside_data_against_the_same_types():
    e = Evidence.model_validate({"line": "12", "text": "boom"})
    assert e == Evidence(line=12, text="boom")
    with pytest.raises(pydantic.ValidationError):
        Evidence.model_validate({"line": "twelve", "text": "boom"})
    r = _report()
    assert Report.model_validate(r.model_dump()).model_dump() == r.model_dump()


def test_rebuilt_like_gives_back_the_same_report_from_its_dump():
    r = _report()
    assert r.failures and r.findings
    again = rebuilt_like(r, r.model_dump())
    assert again.model_dump() == r.model_dump()
    assert isinstance(again.failures[0], Failure) and isinstance(again.findings[0], Finding)
    assert isinstance(again.findings[0].workarounds[0], Workaround)
    assert again.failures[0] is not r.failures[0]  # a copy: the redaction never changes the original


def test_model_copy_replaces_only_what_it_is_given():
    w = Workaround(id="a-b", title="Do it", flags=["--x"], source="engine-hint")
    c = w.model_copy(update={"source": "catalogue"})
    assert c.source == "catalogue" and c.flags == ["--x"] and w.source == "engine-hint"


def test_the_report_schema_keeps_hidden_fields_out():
    schema = Report.model_json_schema(mode="serialization")
    props = schema["$defs"]["Environment"]["properties"]
    assert "settings" in props and "launch_args" not in props and "launch_settings" not in props
    assert "exit_code" in schema["properties"] and "diagnostics" not in schema["properties"]


def test_records_compare_by_value_and_say_what_they_hold():
    a, b = Evidence(line=1, text="x"), Evidence(line=1, text="x")
    assert a == b and a != Evidence(line=2, text="x") and a != Frame(file="x", line=1)
    with pytest.raises(TypeError):
        hash(a)
    assert repr(a) == "Evidence(line=1, text='x', source=None)"
