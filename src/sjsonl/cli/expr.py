"""A small, safe expression language for ``sjsonl filter``: never ``eval``/``exec``.

The expression is parsed with :mod:`ast` and only a whitelisted subset is compiled, into plain Python
closures over the record:

* field names (``lang``), dotted paths (``meta.lang``), ``_`` for the whole record, and subscripts with
  constant keys, indices or slices (``tags[0]``, ``_['odd-name']``, ``text[:5]``);
* constants (strings, numbers, ``True``, ``False``, ``None``) and list/tuple literals of expressions;
* comparisons ``== != < <= > >= in not in is is not`` (chains too), ``and``, ``or``, ``not``, unary ``-``;
* ``len(x)`` and the string methods in :data:`STRING_METHODS` (``x.startswith('en')``).

A missing field (or a path through something that is not an object) is ``None``; a comparison that
cannot be made (``None < 3``, ``'a' in None``) is false; ``len`` or a string method of a value of the
wrong type (or arguments it refuses) is ``None``. Anything else — calls of other functions, attribute
names with ``__``, lambdas, comprehensions, arithmetic, a slice step of 0, nesting deeper than
:data:`MAX_DEPTH` — is refused with :class:`ExprError` when compiled, which points at the part: an
expression that compiles never raises on any record.

Example:
    >>> match = compile_expr("meta.lang == 'en' and len(tags) > 1 and not text.startswith('#')")
    >>> match({"meta": {"lang": "en"}, "tags": [1, 2], "text": "hi"}), match({"tags": [1, 2]})
    (True, False)
    >>> compile_expr("__import__('os')")
    Traceback (most recent call last):
    ...
    sjsonl.cli.expr.ExprError: calling __import__() is not allowed ... at column 1: __import__('os')
"""

from __future__ import annotations

import ast
import operator
import warnings
from collections.abc import Callable
from typing import Any

from sjsonl.errors import InvalidArgumentError

Fn = Callable[[Any], Any]

#: The string methods an expression may call (on a value that is not a string they give ``None``).
STRING_METHODS = frozenset(
    "startswith endswith lower upper strip lstrip rstrip isdigit isalpha isalnum isspace count find".split()  # noqa: SIM905
)
_CONSTANTS = (str, int, float, bool, type(None))
#: How deeply an expression may nest (``not not … x``, ``a.b.c…``, ``x[0][0]…``): far beyond any real
#: filter, and far inside Python's recursion limit when compiled and run.
MAX_DEPTH = 100
#: What a comparison or a string method of values it cannot take raises: the result is false / ``None``.
_CANNOT = (TypeError, ValueError, OverflowError, RecursionError)
_COMPARE: dict[type, Callable[[Any, Any], Any]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: operator.is_,
    ast.IsNot: operator.is_not,
}
_NAMES = {
    ast.Lambda: "lambda",
    ast.BinOp: "arithmetic",
    ast.IfExp: "a conditional expression",
    ast.NamedExpr: "assignment (:=)",
    ast.Dict: "a dict literal",
    ast.Set: "a set literal",
    ast.JoinedStr: "an f-string",
    ast.Await: "await",
    ast.Starred: "* unpacking",
    ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension",
    ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator expression",
}


class ExprError(InvalidArgumentError):
    """An expression outside the language (or not valid syntax); ``pointer()`` shows where."""

    def __init__(self, reason: str, source: str, start: int = 0, end: int | None = None) -> None:
        self.reason, self.source = reason, source
        self.start, self.end = start, max(start + 1, end if end is not None else len(source))
        super().__init__(f"{reason} at column {start + 1}: {source[self.start : self.end]}")

    def pointer(self) -> str:
        """The expression on one line and ``^^^`` under the offending part on the next."""
        return f"  {self.source}\n  {' ' * self.start}{'^' * (self.end - self.start)}"


def compile_expr(source: str) -> Callable[[Any], bool]:
    """Compile ``source`` into a predicate of one record; :class:`ExprError` if it is not allowed."""
    text = source.strip()
    if not text:
        raise ExprError("empty expression", text)
    try:
        with warnings.catch_warnings():  # ("1and x": an "invalid decimal literal" warning, then parsed)
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        line = text.splitlines()[(exc.lineno or 1) - 1] if text.splitlines() else text
        start = max(0, (exc.offset or 1) - 1)
        raise ExprError(f"syntax error: {exc.msg}", line, start, start + 1) from None
    except (RecursionError, MemoryError):
        raise ExprError("expression nested too deeply", text) from None
    except ValueError as exc:  # e.g. a NUL character in the source
        raise ExprError(f"syntax error: {exc}", text) from None
    compiler = _Compiler(text)
    compiler.check_depth(tree.body)
    fn = compiler.compile(tree.body)
    return lambda record: bool(fn(record))


def _field(value: Any, key: Any) -> Any:
    if isinstance(value, dict):
        return value.get(key) if isinstance(key, str) else None
    if isinstance(value, (list, str)) and type(key) is int:
        return value[key] if -len(value) <= key < len(value) else None
    if isinstance(value, (list, str)) and isinstance(key, slice):
        return value[key]
    return None


def _safe(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], bool]:
    def compare(a: Any, b: Any) -> bool:
        try:
            return bool(op(a, b))
        except _CANNOT:  # unorderable types, unhashable keys, records nested past the recursion limit
            return False

    return compare


class _Compiler:
    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()

    def refuse(self, node: ast.AST, reason: str) -> ExprError:
        lineno = getattr(node, "lineno", 1)
        end = getattr(node, "end_col_offset", None) if getattr(node, "end_lineno", 0) == lineno else None
        return ExprError(reason, self.lines[lineno - 1], getattr(node, "col_offset", 0), end)

    def check_depth(self, tree: ast.expr) -> None:
        """Refuse nesting deeper than :data:`MAX_DEPTH` (without recursing: a deep tree is the problem)."""
        stack: list[tuple[ast.AST, int]] = [(tree, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_DEPTH:
                raise self.refuse(node, f"expression nested more than {MAX_DEPTH} levels deep")
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))

    def compile(self, node: ast.expr) -> Fn:
        method = getattr(self, "do_" + type(node).__name__, None)
        if method is None:
            what = _NAMES.get(type(node), type(node).__name__)
            raise self.refuse(node, f"{what} is not allowed in a filter expression")
        return method(node)

    def name_ok(self, node: ast.AST, name: str) -> None:
        if name.startswith("__"):
            raise self.refuse(node, f"names starting with '__' are not allowed ({name})")

    def constant(self, node: ast.expr) -> Any:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            value = self.constant(node.operand)
            if type(value) in (int, float):
                return -value
        elif isinstance(node, ast.Constant) and isinstance(node.value, _CONSTANTS):
            return node.value
        raise self.refuse(node, "a subscript must be a constant string, integer or slice")

    def do_Constant(self, node: ast.Constant) -> Fn:
        if not isinstance(node.value, _CONSTANTS):
            raise self.refuse(node, f"{type(node.value).__name__} constants are not allowed")
        value = node.value
        return lambda r: value

    def do_Name(self, node: ast.Name) -> Fn:
        self.name_ok(node, node.id)
        if node.id == "_":
            return lambda r: r
        key = node.id
        return lambda r: r.get(key) if isinstance(r, dict) else None

    def do_Attribute(self, node: ast.Attribute) -> Fn:
        self.name_ok(node, node.attr)
        base, key = self.compile(node.value), node.attr
        return lambda r: _field(base(r), key)

    def do_Subscript(self, node: ast.Subscript) -> Fn:
        base, sl = self.compile(node.value), node.slice
        key: Any
        if isinstance(sl, ast.Slice):
            parts = [None if p is None else self.constant(p) for p in (sl.lower, sl.upper, sl.step)]
            if not all(p is None or type(p) is int for p in parts):
                raise self.refuse(sl, "slice bounds must be integer constants")
            if parts[2] == 0:
                raise self.refuse(sl, "a slice step cannot be zero")
            key = slice(*parts)
        else:
            key = self.constant(sl)
        return lambda r: _field(base(r), key)

    def do_Compare(self, node: ast.Compare) -> Fn:
        fns = [self.compile(node.left)] + [self.compile(c) for c in node.comparators]
        ops = [_safe(_COMPARE[type(op)]) for op in node.ops]

        def compare(r: Any) -> bool:
            values = [f(r) for f in fns]
            return all(op(a, b) for op, a, b in zip(ops, values, values[1:]))

        return compare

    def do_BoolOp(self, node: ast.BoolOp) -> Fn:
        fns, is_and = [self.compile(v) for v in node.values], isinstance(node.op, ast.And)

        def boolop(r: Any) -> Any:
            value = None
            for f in fns:
                value = f(r)
                if bool(value) != is_and:
                    return value
            return value

        return boolop

    def do_UnaryOp(self, node: ast.UnaryOp) -> Fn:
        operand = self.compile(node.operand)
        if isinstance(node.op, ast.Not):
            return lambda r: not operand(r)
        if isinstance(node.op, ast.USub):
            return lambda r: -v if type(v := operand(r)) in (int, float) else None
        raise self.refuse(node, f"the operator {type(node.op).__name__} is not allowed")

    def do_List(self, node: ast.List) -> Fn:
        fns = [self.compile(e) for e in node.elts]
        return lambda r: [f(r) for f in fns]

    def do_Tuple(self, node: ast.Tuple) -> Fn:
        fns = [self.compile(e) for e in node.elts]
        return lambda r: tuple(f(r) for f in fns)

    def do_Call(self, node: ast.Call) -> Fn:
        allowed = f"only len() and the string methods {', '.join(sorted(STRING_METHODS))} may be called"
        if node.keywords:
            raise self.refuse(node.keywords[0].value, "keyword arguments are not allowed")
        args = [self.compile(a) for a in node.args]
        func = node.func
        if isinstance(func, ast.Name) and func.id == "len":
            if len(args) != 1:
                raise self.refuse(node, "len() takes exactly one argument")
            arg = args[0]
            return lambda r: len(v) if isinstance(v := arg(r), (str, list, dict)) else None
        if isinstance(func, ast.Attribute) and func.attr in STRING_METHODS:
            receiver, name = self.compile(func.value), func.attr

            def call(r: Any) -> Any:
                value = receiver(r)
                if not isinstance(value, str):
                    return None
                try:
                    return getattr(str, name)(value, *(a(r) for a in args))
                except _CANNOT:
                    return None

            return call
        if isinstance(func, ast.Name):
            called = f"{func.id}()"
        elif isinstance(func, ast.Attribute):
            called = f"the method .{func.attr}()"
        else:
            called = "this"
        raise self.refuse(node, f"calling {called} is not allowed ({allowed})")
