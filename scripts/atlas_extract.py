"""Messages a Python source file can raise, assert or log at error level, as templates.

Used by scripts/build_atlas.py on every release's source; kept apart so the suite can test it
on small snippets. A template is literal text with typed holes (HOLE + a type letter: `s` any
text, `d` an integer, `f` a number), the same encoding triage/catalogue/atlas.py matches with.
"""

from __future__ import annotations

import ast
import builtins
import re
from dataclasses import dataclass, field

HOLE = "\x1f"
# in an exception class's message: PARAM + the __init__ parameter's index (two digits) + how it
# is shown (`s`, `d`, `f` as a hole; `r` for `{x!r}`), filled in at each `raise Cls(...)`
PARAM = "\x1d"
_PARAM = re.compile(PARAM + r"(\d\d)([sdfr])")
_BUILTIN_EXC = frozenset(n for n in dir(builtins)
                         if isinstance(getattr(builtins, n), type) and issubclass(getattr(builtins, n), BaseException))
# an exception class's own attribute that holds its message when neither __str__ nor the call to
# the base class's __init__ says it (a base class elsewhere prints it)
_MESSAGE_ATTRS = ("message", "msg")
# a module of exception classes: a call of a name imported from it builds an exception
_RAISER = re.compile(r"(?i)(?:^|_)raise(?:_|$)")  # raise_(exc), _raise_error(exc)
_ERRORS_MODULE = re.compile(r"(?i)(?:^|\.)\w*(?:errors?|exceptions?)$")
MIN_TEXT = 8  # literal characters a message needs to tell where it came from


def says_enough(text: str) -> bool:
    """The template has MIN_TEXT literal characters or more (its holes not counted)."""
    return len(re.sub(f"{HOLE}[sdf]", "", text).strip()) >= MIN_TEXT


LOG_LEVELS = {"error", "exception", "critical", "fatal"}
LOGGER_NAMES = re.compile(r"(?i)^_?(logger|log|logging|LOGGER|_LOGGER|init_logger)$")
# an attribute chain through one of these names reads a setting (server_args.x, self.config.y,
# vllm_config.cache_config.z, envs.VLLM_...): its last name is a config field
CONFIG_OWNER = re.compile(r"(?i)(args|config|cfg|envs|settings)$")
_EXC_CLASS = re.compile(r"(Error|Exception)$")
_CONFIG_CLASS = re.compile(r"(Args|Config)$")
_PCT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?([diouxXeEfFgGcrsa%])")
_BRACE = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")


@dataclass
class Message:
    kind: str  # raise | assert | log; with deferred=True also class | call (see extract)
    exception: str  # the class raised, AssertionError, or the log level
    template: str
    function: str  # qualified: Class.method or function
    line: int
    condition: str = ""
    names: list[str] = field(default_factory=list)  # config fields the condition or message reads
    # class: {"params": [...], "defaults": {name: [text, repr]}}; call: {"args": [...], "kw": {...}},
    # each argument as [its template or None, repr of a string constant or None]
    extra: dict = field(default_factory=dict)


def _hole(spec: str) -> str:
    spec = spec.strip()
    if spec.endswith(("d", "x", "X", "o", "b")) and not spec.endswith("s"):
        return HOLE + "d"
    if spec.endswith(("f", "F", "e", "E", "g", "G", "%")):
        return HOLE + "f"
    return HOLE + "s"


class _Templater:
    """Turns a message expression into a template, resolving simple local string variables."""

    def __init__(self, local_strings: dict[str, list[ast.expr]], params: dict[str, int] | None = None,
                 attrs: dict[str, list[ast.expr]] | None = None):
        self.local = local_strings
        self.exprs: list[ast.expr] = []  # the expressions that fill the holes
        # inside an exception class: __init__'s parameters (a PARAM marker each) and the string
        # expressions __init__ assigns to self.X
        self.params = params or {}
        self.attrs = attrs or {}

    def _param(self, node: ast.expr, how: str) -> str | None:
        """The PARAM marker of an __init__ parameter (`name`, or `self.x` assigned `name`)."""
        if isinstance(node, ast.Attribute) and _is_self(node.value) and len(self.attrs.get(node.attr, ())) == 1:
            node = self.attrs[node.attr][0]
        if isinstance(node, ast.Name) and node.id in self.params and node.id not in self.local:
            return f"{PARAM}{self.params[node.id]:02d}{how}"
        return None

    def __call__(self, node: ast.expr, depth: int = 0) -> str | None:
        if depth > 4:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
        if self.params and (marker := self._param(node, "s")) is not None:
            return marker
        if isinstance(node, ast.Attribute) and _is_self(node.value) and node.attr in self.attrs:
            parts = [self(v, depth + 1) for v in self.attrs[node.attr]]
            return None if any(p is None for p in parts) else "".join(p for p in parts if p is not None)
        if isinstance(node, ast.JoinedStr):
            out = []
            for v in node.values:
                if isinstance(v, ast.Constant) and isinstance(v.value, str):
                    out.append(v.value)
                elif isinstance(v, ast.FormattedValue):
                    spec = ""
                    if isinstance(v.format_spec, ast.JoinedStr):
                        spec = "".join(c.value for c in v.format_spec.values
                                       if isinstance(c, ast.Constant) and isinstance(c.value, str))
                    hole = _hole(spec)
                    marker = self._param(v.value, "r" if v.conversion == ord("r") else hole[1]) if self.params else None
                    inner = (self(v.value, depth + 1) if marker is None and not spec and v.conversion == -1
                             and isinstance(v.value, ast.Attribute) and _is_self(v.value.value) else None)
                    if marker is not None:
                        out.append(marker)
                    elif inner is not None:
                        out.append(inner)  # f"{self.message}": the text __init__ built
                    else:
                        self.exprs.append(v.value)
                        out.append(hole)
            return "".join(out)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self._part(node.left, depth), self._part(node.right, depth)
            return left + right
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
            fmt = self(node.left, depth + 1)
            if fmt is None:
                return None
            args = node.right.elts if isinstance(node.right, ast.Tuple) else [node.right]
            self.exprs.extend(args)
            return _PCT.sub(lambda m: "%" if m.group(1) == "%" else _hole(m.group(1)), fmt)
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
                and isinstance(node.func.value, (ast.Constant, ast.Name))):
            fmt = self(node.func.value, depth + 1)
            if fmt is None:
                return None
            self.exprs.extend(node.args)
            self.exprs.extend(k.value for k in node.keywords)
            return _BRACE.sub(lambda m: m.group(0)[0] if m.group(1) is None else _hole(m.group(1).partition(":")[2]),
                              fmt)
        if isinstance(node, ast.Name) and node.id in self.local:
            parts = [self(v, depth + 1) for v in self.local[node.id]]
            if any(p is None for p in parts):
                return None
            return "".join(p for p in parts if p is not None)
        return None

    def _part(self, node: ast.expr, depth: int) -> str:
        text = self(node, depth + 1)
        if text is None:
            self.exprs.append(node)
            return HOLE + "s"
        return text


def _normalise(t: str) -> str:
    # adjacent holes read as one (`{a}{b}` matches any text either way)
    t = re.sub(f"(?:{HOLE}[sdf]){{2,}}", HOLE + "s", t)
    # not str.strip(): Python counts the hole marker (U+001F) as white space, and a message that
    # opens with a value ("{dtype} is not supported ...") would lose its first hole
    return t.strip(" \t\r\n")


def _names(nodes: list[ast.expr], self_is_config: bool = False) -> list[str]:
    out: list[str] = []
    for n in nodes:
        for sub in ast.walk(n):
            if isinstance(sub, ast.Attribute):
                owner = sub.value
                owner_name = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
                if self_is_config and owner_name == "self":
                    owner_name = "config"  # inside ServerArgs / ModelConfig: self.x is a setting
                if CONFIG_OWNER.search(owner_name) and not sub.attr.startswith("__") and sub.attr not in out:
                    out.append(sub.attr)
            elif (isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Constant)
                  and isinstance(sub.slice.value, str)):
                owner = sub.value
                owner_name = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
                if re.search(r"(?i)(args|config|dict)$", owner_name) and sub.slice.value not in out:
                    out.append(sub.slice.value)
    return out


def _local_strings(fn: ast.AST) -> dict[str, list[ast.expr]]:
    """Names a function assigns string expressions to once (`msg = f"..."`, then `msg += ...`)."""
    found: dict[str, list[ast.expr]] = {}
    assigned: dict[str, int] = {}
    for node in ast.walk(fn):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            assigned[name] = assigned.get(name, 0) + 1
            found[name] = [node.value]
        elif (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add)
              and isinstance(node.target, ast.Name) and node.target.id in found):
            found[node.target.id].append(node.value)
    return {k: v for k, v in found.items() if assigned.get(k) == 1}


def _exc_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def _is_self(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id == "self"


def _self_attrs(fn: ast.AST) -> dict[str, list[ast.expr]]:
    """Attributes a method assigns once (`self.message = f"..."`, then `self.message += ...`)."""
    found: dict[str, list[ast.expr]] = {}
    assigned: dict[str, int] = {}
    for node in ast.walk(fn):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Attribute)
                and _is_self(node.targets[0].value)):
            name = node.targets[0].attr
            assigned[name] = assigned.get(name, 0) + 1
            found[name] = [node.value]
        elif (isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Attribute)
              and _is_self(node.target.value) and node.target.attr in found):
            found[node.target.attr].append(node.value)
    return {k: v for k, v in found.items() if assigned.get(k) == 1}


def _arg(node: ast.expr, t: _Templater) -> list[str | None]:
    """An argument of `raise Cls(...)` as [its template or None, repr of a string constant or None]."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return [str(node.value), None]
    text = t(node)
    if text is None:
        t.exprs.append(node)
    return [text, repr(node.value) if isinstance(node, ast.Constant) and isinstance(node.value, str) else None]


@dataclass
class ExcClass:
    """An exception class whose own code builds its message from its __init__'s parameters:
    `__str__` returns it, or __init__ passes it to the base class's __init__ (or keeps it in
    self.message). `templates` hold PARAM markers, filled in by `bind` at each raise."""

    name: str
    templates: list[tuple[str, str, int]]  # (template with PARAM markers, function, line)
    params: list[str]  # __init__'s parameters after self
    positional: int  # how many of them a positional argument can fill
    defaults: dict[str, list[str | None]]  # a parameter's default, as an argument


def bind(template: str, params: list[str], positional: int, defaults: dict[str, list[str | None]],
         args: list[list[str | None]], kw: dict[str, list[str | None]]) -> str:
    """The message a `raise Cls(*args, **kw)` prints: each PARAM marker filled with the argument's
    text (a string constant's own text, or its repr for `{x!r}`), or a hole where the argument's
    value is not known from the source."""
    def fill(m: re.Match[str]) -> str:
        i, how = int(m.group(1)), m.group(2)
        name = params[i] if i < len(params) else ""
        val = args[i] if i < min(len(args), positional) else kw.get(name, defaults.get(name))
        hole = HOLE + ("s" if how == "r" else how)
        if val is None:
            return hole
        text, rep = val
        return (rep if how == "r" else text) or hole
    return _normalise(_PARAM.sub(fill, template))


def unbound(template: str) -> str:
    """A class's message as its definition shows it: every parameter a hole."""
    return _normalise(_PARAM.sub(lambda m: HOLE + ("s" if m.group(2) == "r" else m.group(2)), template))


def _class_message(init: ast.FunctionDef | None, strm: ast.FunctionDef | None, params: dict[str, int],
                   attrs: dict[str, list[ast.expr]]) -> list[tuple[str, ast.AST]]:
    """(template with PARAM markers, the node it comes from) of a class's message."""
    def usable(text: str | None) -> bool:
        return text is not None and (PARAM in text or says_enough(text))

    if strm is not None:
        t = _Templater(_local_strings(strm), params, attrs)
        got = [(text, r) for r in ast.walk(strm) if isinstance(r, ast.Return) and r.value is not None
               and usable(text := t(r.value))]
        if got:
            return got  # type: ignore[return-value]
    if init is None:
        return []
    t = _Templater(_local_strings(init), params, attrs)
    for node in ast.walk(init):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"):
            continue
        owner = node.func.value
        args = node.args
        if isinstance(owner, ast.Name) and args and _is_self(args[0]):
            args = args[1:]  # Base.__init__(self, message)
        elif not (isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name) and owner.func.id == "super"):
            continue
        if args and usable(text := t(args[0])):
            return [(text, node)]  # type: ignore[list-item]
    for name in _MESSAGE_ATTRS:
        if name in attrs and usable(text := t(ast.Attribute(value=ast.Name(id="self"), attr=name))):
            return [(text, attrs[name][0])]  # type: ignore[list-item]
    return []


def exception_classes(tree: ast.AST) -> dict[str, ExcClass]:
    """The module's exception classes whose message their own code builds (a subclass without
    an __init__ or __str__ of its own takes its base class's, when that base is in the module)."""
    defs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    exc: set[str] = set()
    grew = True
    while grew:
        grew = False
        for name, c in defs.items():
            if name not in exc and (_EXC_CLASS.search(name) or any(
                    (b := _exc_name(base)) and (_EXC_CLASS.search(b) or b in exc or b in _BUILTIN_EXC)
                    for base in c.bases)):
                exc.add(name)
                grew = True
    out: dict[str, ExcClass] = {}
    for name in sorted(exc):
        chain, c = [], defs[name]
        while c is not None and c not in chain:
            chain.append(c)
            c = next((defs[b] for base in c.bases if (b := _exc_name(base)) in defs and b in exc), None)

        def method(m: str, chain: list[ast.ClassDef] = chain) -> tuple[ast.ClassDef, ast.FunctionDef] | tuple[None, None]:
            return next(((k, f) for k in chain for f in k.body
                         if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == m), (None, None))

        init_cls, init = method("__init__")
        str_cls, strm = method("__str__")
        if init is None and strm is None:
            continue
        params: list[str] = []
        positional = 0
        defaults: dict[str, list[str | None]] = {}
        attrs: dict[str, list[ast.expr]] = {}
        if init is not None:
            a = init.args
            pos = [x.arg for x in (*a.posonlyargs, *a.args)][1:]
            params = pos + [x.arg for x in a.kwonlyargs]
            positional = len(pos)
            with_defaults = [*zip(pos[len(pos) - len(a.defaults):], a.defaults, strict=True),
                             *((k.arg, d) for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True))]
            for pname, d in with_defaults:
                if isinstance(d, ast.Constant) and d.value is not None:
                    defaults[pname] = _arg(d, _Templater({}))
            attrs = _self_attrs(init)
        got = _class_message(init, strm, {p: i for i, p in enumerate(params)}, attrs)
        if not got or len(params) > 99:
            continue
        owner = {id(n) for n in ast.walk(strm)} if strm is not None else set()
        out[name] = ExcClass(name=name, params=params, positional=positional, defaults=defaults, templates=[
            (text, f"{(str_cls if id(node) in owner else init_cls).name}.{'__str__' if id(node) in owner else '__init__'}",
             getattr(node, "lineno", 0)) for text, node in got])
    return out


def _src(node: ast.AST, limit: int = 240) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Walker(ast.NodeVisitor):
    def __init__(self, classes: dict[str, ExcClass] | None = None, deferred: bool = False,
                 imported: frozenset[str] = frozenset()) -> None:
        self.classes = classes or {}
        self.deferred = deferred
        self.imported = imported  # names imported from an errors/exceptions module
        self.scope: list[str] = []
        self.funcs: list[ast.AST] = []
        self.conds: list[tuple[ast.expr, bool]] = []  # enclosing if tests, innermost last
        self.out: list[Message] = []
        self._locals: dict[int, dict[str, list[ast.expr]]] = {}
        self._raised: set[int] = set()  # exception calls already emitted by their raise

    def _func_locals(self) -> dict[str, list[ast.expr]]:
        if not self.funcs:
            return {}
        fn = self.funcs[-1]
        if id(fn) not in self._locals:
            self._locals[id(fn)] = _local_strings(fn)
        return self._locals[id(fn)]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self.scope.append(node.name)
        saved, self.conds = self.conds, []
        self.generic_visit(node)
        self.conds = saved
        self.scope.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self.scope.append(node.name)
        self.funcs.append(node)
        saved, self.conds = self.conds, []
        for stmt in node.body:
            self.visit(stmt)
        self.conds = saved
        self.funcs.pop()
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_If(self, node: ast.If) -> None:
        self.visit(node.test)
        self.conds.append((node.test, False))
        for stmt in node.body:
            self.visit(stmt)
        self.conds[-1] = (node.test, True)
        for stmt in node.orelse:
            self.visit(stmt)
        self.conds.pop()

    def _condition(self) -> tuple[str, list[ast.expr]]:
        if not self.conds:
            return "", []
        test, negated = self.conds[-1]
        text = _src(test)
        return (f"not ({text})" if negated else text), [test]

    def _emit(self, kind: str, exc: str, msg: ast.expr, line: int, cond: str, cond_nodes: list[ast.expr]) -> None:
        t = _Templater(self._func_locals())
        text = t(msg)
        if text is not None:
            self._emit_text(kind, exc, _normalise(text), line, cond, cond_nodes + t.exprs)

    def _emit_text(self, kind: str, exc: str, text: str, line: int, cond: str, nodes: list[ast.expr],
                   extra: dict | None = None) -> None:
        if kind != "call" and not says_enough(text):
            return
        self.out.append(Message(kind=kind, exception=exc, template=text, function=".".join(self.scope) or "<module>",
                                line=line, condition=cond, extra=extra or {},
                                names=_names(nodes, bool(self.scope) and _CONFIG_CLASS.search(self.scope[0]) is not None)))

    def _arguments(self, call: ast.Call) -> tuple[list, dict, list[ast.expr]] | None:
        """A call's arguments as `bind` takes them, and the expressions read; None for `*args`."""
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        t = _Templater(self._func_locals())
        args = [_arg(a, t) for a in call.args]
        kw = {k.arg: _arg(k.value, t) for k in call.keywords if k.arg is not None}
        return args, kw, t.exprs

    def _raise_class(self, call: ast.Call, name: str, line: int) -> bool:
        """`raise Cls(...)` of a class whose message its own code builds: the message with this
        call's arguments filled in (the class in this module), or a `call` row for
        scripts/build_atlas.py to fill in from the class's module. True when the class is here."""
        cls = self.classes.get(name)
        if cls is None and (not self.deferred or name in _BUILTIN_EXC or not name[:1].isupper()
                            or not (call.args or call.keywords)):
            return False  # `raise copy.deepcopy(err)` raises no class of that name
        got = self._arguments(call)
        if got is None:
            return cls is not None
        args, kw, exprs = got
        cond, nodes = self._condition()
        if cls is None:
            self._emit_text("call", name, "", line, cond, nodes + exprs, {"args": args, "kw": kw})
            return False
        for template, _func, _line in cls.templates:
            self._emit_text("raise", name, bind(template, cls.params, cls.positional, cls.defaults, args, kw),
                            line, cond, nodes + exprs)
        return True

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and (name := _exc_name(exc)):
            self._raised.add(id(exc))
            if not self._raise_class(exc, name, node.lineno) and exc.args:
                cond, nodes = self._condition()
                self._emit("raise", name, exc.args[0], node.lineno, cond, nodes)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            self._emit("assert", "AssertionError", node.msg, node.lineno, _src(node.test), [node.test])
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _exc_name(node)
        inner = node.args[0] if node.args and isinstance(node.args[0], ast.Call) else None
        if name and inner is not None and _RAISER.search(name) and (exc := _exc_name(inner)) and exc[:1].isupper():
            # an exception handed to a helper that raises it (Triton 3.5 on: `raise_(OutOfResources(...))`)
            self._raised.add(id(inner))
            if not self._raise_class(inner, exc, node.lineno) and inner.args:
                cond, nodes = self._condition()
                self._emit("raise", exc, inner.args[0], node.lineno, cond, nodes)
        if id(node) not in self._raised and name is not None and (
                name in self.classes or (name in self.imported and not _EXC_CLASS.search(name))):
            # built here, raised elsewhere
            self._raise_class(node, name, node.lineno)
        elif (id(node) not in self._raised and node.args and name is not None and _EXC_CLASS.search(name)
                and not name.endswith("Warning")):
            # an exception built here and raised elsewhere (`return RuntimeError(...)` from a
            # helper that describes the failure, `err = ValueError(...)`)
            self._raise_class(node, name, node.lineno)
            cond, nodes = self._condition()
            self._emit("raise", name, node.args[0], node.lineno, cond, nodes)
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in LOG_LEVELS and node.args:
            owner = f.value
            owner_name = owner.id if isinstance(owner, ast.Name) else owner.attr if isinstance(owner, ast.Attribute) else ""
            if LOGGER_NAMES.match(owner_name):
                cond, nodes = self._condition()
                msg = node.args[0]
                if len(node.args) > 1 and isinstance(msg, (ast.Constant, ast.JoinedStr)):
                    # logger.error("... %s", x): the arguments fill the %-holes
                    msg = ast.BinOp(left=msg, op=ast.Mod(), right=ast.Tuple(elts=list(node.args[1:]), ctx=ast.Load()))
                self._emit("log", f.attr, msg, node.lineno, cond, nodes)
        self.generic_visit(node)


def extract(source: str | bytes, deferred: bool = False) -> list[Message]:
    """Every raise, assert-with-message and error-level log call of one module.

    An exception class that builds its own message (`__str__` returns it, or `__init__` passes
    it to the base class) gives that message at its definition (`Cls.__str__`, every parameter a
    hole) and at each `raise Cls(...)` of the module, with the call's arguments filled in
    (`raise OutOfResources(n, limit, "shared memory")` prints "out of resource: shared memory, ...").
    With `deferred`, the rows scripts/build_atlas.py joins across a release's files come too:
    `class` (such a class: its template with PARAM markers, `extra` its parameters) and `call`
    (a `raise Cls(...)` of a class defined elsewhere: `extra` its arguments)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return []
    classes = exception_classes(tree)
    imported = frozenset(a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                         and n.module and _ERRORS_MODULE.search(n.module) for a in n.names)
    w = _Walker(classes, deferred, imported)
    w.visit(tree)
    for cls in classes.values():
        info = {"params": cls.params, "positional": cls.positional, "defaults": cls.defaults}
        for template, func, line in cls.templates:
            text = unbound(template)
            if says_enough(text):
                w.out.append(Message(kind="raise", exception=cls.name, template=text, function=func, line=line))
            if deferred:
                w.out.append(Message(kind="class", exception=cls.name, template=template, function=func, line=line,
                                     extra=info))
    return w.out
