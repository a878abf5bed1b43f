"""The source atlas's extractor (scripts/atlas_extract.py): messages as typed templates, with
the guard that raises them and the settings they read."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from atlas_extract import HOLE, extract  # noqa: E402


def _one(src: str):
    msgs = extract(src)
    assert len(msgs) == 1, msgs
    return msgs[0]


def test_fstring_holes_are_typed_by_their_format_spec():
    m = _one(
        "def check(n, frac, name):\n"
        "    raise ValueError(f'KV cache holds {n:d} tokens, {frac:.2f} of memory, for {name}')\n")
    assert m.template == f"KV cache holds {HOLE}d tokens, {HOLE}f of memory, for {HOLE}s"
    assert (m.exception, m.function, m.line, m.kind) == ("ValueError", "check", 2, "raise")


def test_percent_format_of_a_logged_error_and_its_arguments():
    m = _one("import logging\nlogger = logging.getLogger()\n"
             "def f(rank, e):\n    logger.error('Rank %d failed with %s: giving up', rank, e)\n")
    assert m.template == f"Rank {HOLE}d failed with {HOLE}s: giving up"
    assert (m.kind, m.exception) == ("log", "error")


def test_a_message_built_in_a_local_variable_is_followed():
    m = _one("def f(x):\n"
             "    msg = f'The model context length {x} is larger than '\n"
             "    msg += 'the maximum the KV cache can hold.'\n"
             "    raise RuntimeError(msg)\n")
    assert m.template == f"The model context length {HOLE}s is larger than the maximum the KV cache can hold."


def test_str_format_and_concatenation():
    m = _one("def f(a, b):\n    raise TypeError('Expected {} but got {:d}'.format(a, b) + ' in the config file')\n")
    assert m.template == f"Expected {HOLE}s but got {HOLE}d in the config file"


def test_the_enclosing_guard_and_the_settings_it_reads():
    m = _one("class Scheduler:\n"
             "    def check(self):\n"
             "        if self.server_args.enable_dp_attention and self.tp_size % 2:\n"
             "            raise ValueError('DP attention needs an even tensor parallel size')\n")
    assert m.condition == "self.server_args.enable_dp_attention and self.tp_size % 2"
    assert m.function == "Scheduler.check"
    assert m.names == ["enable_dp_attention"]


def test_an_else_branch_negates_the_guard():
    m = _one("def f(ok):\n    if ok:\n        pass\n    else:\n        raise RuntimeError('the handshake with the detokenizer failed')\n")
    assert m.condition == "not (ok)"


def test_inside_a_config_class_self_fields_are_settings():
    m = _one("class ServerArgs:\n    def check(self):\n"
             "        assert self.mem_fraction_static < 1.0, 'mem_fraction_static must be below one'\n")
    assert (m.kind, m.exception, m.condition) == ("assert", "AssertionError", "self.mem_fraction_static < 1.0")
    assert m.names == ["mem_fraction_static"]


@pytest.mark.parametrize("src", [
    "def f(e):\n    raise RuntimeError(e)\n",  # no text of its own
    "def f(a, b):\n    raise ValueError(f'{a}: {b}')\n",  # holes and punctuation only
    "def f():\n    raise ValueError('bad')\n",  # too short to say where it came from
    "def f():\n    logger.info('Loading weights took a very long time')\n",  # not an error
    "def f(:\n",  # does not parse: nothing, no exception
])
def test_what_is_not_a_template(src):
    assert extract(src) == []


def test_adjacent_holes_fold_into_one():
    m = _one("def f(a, b):\n    raise ValueError(f'Unsupported quantization method {a}{b} for this layer')\n")
    assert m.template == f"Unsupported quantization method {HOLE}s for this layer"


def test_an_exception_built_by_a_helper_and_raised_elsewhere():
    # SGLang's engine.py builds the scheduler-death error in a helper and raises its result
    m = _one("def _died(rank, proc):\n"
             "    return RuntimeError(\n"
             "        f'Rank {rank} scheduler died during initialization '\n"
             "        f'(exit code: {proc.exitcode}). '\n"
             "    )\n")
    assert m.template == f"Rank {HOLE}s scheduler died during initialization (exit code: {HOLE}s)."
    assert (m.kind, m.exception, m.function) == ("raise", "RuntimeError", "_died")


def test_a_raised_call_is_emitted_once():
    assert len(extract("def f(x):\n    raise ValueError(f'the tokenizer has no chat template: {x}')\n")) == 1


def test_a_message_that_opens_with_a_value_keeps_its_first_hole():
    # str.strip() counts the hole marker as white space: "{dtype} is not supported" became
    # "s is not supported", which no log line matches
    m = _one("def f(dtype, name):\n    raise ValueError(f'{dtype} is not supported for quantization method {name}')\n")
    assert m.template == f"{HOLE}s is not supported for quantization method {HOLE}s"


def test_bare_asserts_are_read_with_their_function_and_only_when_whole_on_one_line():
    from atlas_bare import bare_asserts

    src = ("class ServerArgs:\n"
           "    def check(self):\n"
           "        assert self.page_size % 64 == 0  # the kernel's tile\n"
           "        assert self.x, 'has a message'\n"
           "        assert isinstance(self.y, (int, str))\n"
           "        assert (\n"
           "            self.z > 0\n"
           "        )\n"
           "        def inner(s):\n"
           "            assert s == 'a,b'\n"
           "    def other(self):\n"
           "        assert self.q is not None\n"
           "assert TOP\n")
    got = [(b.function, b.line, b.code, b.condition) for b in bare_asserts(src)]
    assert got == [
        ("ServerArgs.check", 3, "assert self.page_size % 64 == 0 # the kernel's tile", "self.page_size % 64 == 0"),
        ("ServerArgs.check", 5, "assert isinstance(self.y, (int, str))", "isinstance(self.y, (int, str))"),
        ("ServerArgs.check.inner", 10, "assert s == 'a,b'", "s == 'a,b'"),
        ("ServerArgs.other", 12, "assert self.q is not None", "self.q is not None"),
        ("<module>", 13, "assert TOP", "TOP"),
    ]


# Exception classes that build their own message: Triton's OutOfResources is raised as
# `OutOfResources(self.metadata.shared, max_shared, "shared memory")` and prints "out of resource:
# shared memory, Required: ..."; the text is in the class, not at the raise.
OOR_STR = ("class OutOfResources(TritonError):\n"
           "    def __init__(self, required, limit, name):\n"
           "        self.required = required\n"
           "        self.limit = limit\n"
           "        self.name = name\n"
           "    def __str__(self) -> str:\n"
           "        return f\"out of resource: {self.name}, Required: {self.required}, Hardware limit: {self.limit}. \"\n")
OOR_INIT = ("class OutOfResources(Exception):\n"
            "    def __init__(self, required, limit, name):\n"
            "        self.message = f'out of resource: {name}, '\\\n"
            "                       f'Required: {required}, '\\\n"
            "                       f'Hardware limit: {limit}'\n"
            "        self.message += '. Reducing block sizes or `num_stages` may help.'\n"
            "        super().__init__(self.message)\n")


def test_an_exception_class_whose_str_builds_the_message_gives_it_at_its_definition_and_each_raise():
    src = OOR_STR + ("def check(shared, max_shared):\n"
                     "    if shared > max_shared:\n"
                     "        raise OutOfResources(shared, max_shared, 'shared memory')\n")
    got = sorted((m.function, m.line, m.template, m.condition) for m in extract(src))
    assert got == [
        ("OutOfResources.__str__", 7, f"out of resource: {HOLE}s, Required: {HOLE}s, Hardware limit: {HOLE}s.", ""),
        ("check", 10, f"out of resource: shared memory, Required: {HOLE}s, Hardware limit: {HOLE}s.",
         "shared > max_shared"),
    ]
    assert {m.exception for m in extract(src)} == {"OutOfResources"}


def test_init_that_builds_self_message_and_passes_it_to_the_base_class():
    # Triton 2.1's shape: self.message built over three f-strings and a +=, then super().__init__
    src = OOR_INIT + "def f(n):\n    raise OutOfResources(n, 49152, name='shared memory')\n"
    got = {m.function: m.template for m in extract(src)}
    assert got == {
        "OutOfResources.__init__": f"out of resource: {HOLE}s, Required: {HOLE}s, Hardware limit: {HOLE}s. "
                                   "Reducing block sizes or `num_stages` may help.",
        "f": f"out of resource: shared memory, Required: {HOLE}s, Hardware limit: 49152. "
             "Reducing block sizes or `num_stages` may help.",
    }


def test_repr_conversion_defaults_and_a_message_that_is_only_the_argument():
    src = ("class KernelError(RuntimeError):\n"
           "    def __init__(self, kernel, reason='no reason given'):\n"
           "        super().__init__(f'kernel {kernel!r} failed to compile: {reason}')\n"
           "class Wrapped(Exception):\n"
           "    def __init__(self, msg):\n"
           "        super().__init__(msg)\n"
           "def f(x):\n"
           "    raise KernelError('fused_moe')\n"
           "def g(x):\n"
           "    raise Wrapped(f'the tokenizer has no chat template: {x}')\n")
    got = {m.function: m.template for m in extract(src)}
    assert got["f"] == "kernel 'fused_moe' failed to compile: no reason given"
    assert got["KernelError.__init__"] == f"kernel {HOLE}s failed to compile: {HOLE}s"
    assert got["g"] == f"the tokenizer has no chat template: {HOLE}s"  # as if Wrapped were ValueError
    assert "Wrapped.__init__" not in got  # its definition has no text of its own


def test_a_class_defined_in_another_file_is_joined_by_the_build():
    """`raise Cls(...)` of a class another file defines: a `call` row with the arguments, joined
    by scripts/build_atlas.py with the `class` row of the same release; `raise_(Cls(...))`
    (Triton 3.5 on) is a raise too."""
    from build_atlas import _joined_raises

    def rows(src: str) -> list:
        return [[m.kind, m.exception, m.template, m.function, m.line, m.condition, m.names]
                + ([m.extra] if m.extra else []) for m in extract(src, deferred=True)]

    errors = rows(OOR_STR)
    compiler = rows("from ..runtime.autotuner import OutOfResources\n"
                    "class CompiledKernel:\n"
                    "    def _init_handles(self):\n"
                    "        if self.metadata.shared > max_shared:\n"
                    "            raise_(OutOfResources(self.metadata.shared, max_shared, 'shared memory'))\n"
                    "        raise copy.deepcopy(err)\n")
    assert [r[:2] for r in compiler] == [["call", "OutOfResources"]]  # deepcopy is no class
    got = _joined_raises([("triton/runtime/errors.py", errors), ("triton/compiler/compiler.py", compiler)])
    assert got == [("OutOfResources", "triton/compiler/compiler.py", "CompiledKernel._init_handles", 5,
                    "self.metadata.shared > max_shared", [],
                    f"out of resource: shared memory, Required: {HOLE}s, Hardware limit: {HOLE}s.")]
    # the same class name with another message in a third file: which one is raised is not known
    other = rows(OOR_STR.replace("out of resource", "resource exhausted"))
    assert _joined_raises([("a/errors.py", errors), ("b/errors.py", other), ("c.py", compiler)]) == []
    # the same definition in two files (Triton 2.x has OutOfResources in errors.py and autotuner.py)
    assert len(_joined_raises([("a/errors.py", errors), ("b/autotuner.py", errors), ("c.py", compiler)])) == 1
