"""Messages a Python source file can raise, assert or log at error level, as templates.

Used by scripts/build_atlas.py on every release's source; kept apart so the suite can test it
on small snippets. A template is literal text with typed holes (HOLE + a type letter: `s` any
text, `d` an integer, `f` a number), the same encoding triage/catalogue/atlas.py matches with.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

HOLE = "\x1f"
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
    kind: str  # raise | assert | log
    exception: str  # the class raised, AssertionError, or the log level
    template: str
    function: str  # qualified: Class.method or function
    line: int
    condition: str = ""
    names: list[str] = field(default_factory=list)  # config fields the condition or message reads


def _hole(spec: str) -> str:
    spec = spec.strip()
    if spec.endswith(("d", "x", "X", "o", "b")) and not spec.endswith("s"):
        return HOLE + "d"
    if spec.endswith(("f", "F", "e", "E", "g", "G", "%")):
        return HOLE + "f"
    return HOLE + "s"


class _Templater:
    """Turns a message expression into a template, resolving simple local string variables."""

    def __init__(self, local_strings: dict[str, list[ast.expr]]):
        self.local = local_strings
        self.exprs: list[ast.expr] = []  # the expressions that fill the holes

    def __call__(self, node: ast.expr, depth: int = 0) -> str | None:
        if depth > 4:
            return None
        if isinstance(node, ast.Constant):
            return node.value if isinstance(node.value, str) else None
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
                    self.exprs.append(v.value)
                    out.append(_hole(spec))
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


def _src(node: ast.AST, limit: int = 240) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Walker(ast.NodeVisitor):
    def __init__(self) -> None:
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
        if text is None:
            return
        text = _normalise(text)
        literal = re.sub(f"{HOLE}[sdf]", "", text)
        if len(literal.strip()) < 8:
            return
        self.out.append(Message(kind=kind, exception=exc, template=text, function=".".join(self.scope) or "<module>",
                                line=line, condition=cond,
                                names=_names(cond_nodes + t.exprs, bool(self.scope) and _CONFIG_CLASS.search(self.scope[0]) is not None)))

    def visit_Raise(self, node: ast.Raise) -> None:
        exc = node.exc
        if isinstance(exc, ast.Call) and exc.args:
            name = _exc_name(exc)
            if name:
                self._raised.add(id(exc))
                cond, nodes = self._condition()
                self._emit("raise", name, exc.args[0], node.lineno, cond, nodes)
        self.generic_visit(node)

    def visit_Assert(self, node: ast.Assert) -> None:
        if node.msg is not None:
            self._emit("assert", "AssertionError", node.msg, node.lineno, _src(node.test), [node.test])
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        name = _exc_name(node)
        if (id(node) not in self._raised and node.args and name is not None and _EXC_CLASS.search(name)
                and not name.endswith("Warning")):
            # an exception built here and raised elsewhere (`return RuntimeError(...)` from a
            # helper that describes the failure, `err = ValueError(...)`)
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


def extract(source: str | bytes) -> list[Message]:
    """Every raise, assert-with-message and error-level log call of one module."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    w = _Walker()
    w.visit(tree)
    return w.out
