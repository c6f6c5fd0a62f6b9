"""How a task travels to a worker process of :mod:`sjsonl.runtime.parallel`: pickled, with functions a worker
cannot import by name sent by value.

A worker never imports the user's ``__main__`` (a script without a main guard, a notebook), so what is
defined there cannot be found by name. Lambdas, closures and functions of the script or notebook therefore
travel as their code (``marshal``: the workers run this very interpreter), the globals they use and their
closure — as cloudpickle does, for the case sjsonl needs (🤗 users pass lambdas to ``filter(num_proc=)``).
A class defined in the script cannot travel: :func:`dumps` raises :class:`ShippingError` saying so, before any
work starts, and callers run in-process instead.
"""

from __future__ import annotations

import builtins
import importlib
import io
import marshal
import pickle
import sys
import types
from typing import Any

from sjsonl.errors import SJSONLError

__all__ = ["ShippingError", "dumps"]

_MAIN = ("__main__", "__mp_main__")  # the user's script or notebook: never imported by a worker


class ShippingError(SJSONLError):
    """A task cannot be sent to a worker process (e.g. it holds a class defined in the user's script)."""


def _importable(obj: Any) -> bool:
    """Whether a worker finds ``obj`` by its module and qualified name (never in the user's ``__main__``)."""
    module = getattr(obj, "__module__", None)
    if module is None or module in _MAIN or module not in sys.modules:
        return False
    found: Any = sys.modules[module]
    for part in obj.__qualname__.split("."):
        found = getattr(found, part, None)
    return found is obj


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):  # nested functions and comprehensions
            names |= _global_names(const)
    return names


def _new_function(code: bytes, name: str, cells: int | None) -> types.FunctionType:
    closure = None if cells is None else tuple(types.CellType() for _ in range(cells))
    return types.FunctionType(marshal.loads(code), {"__builtins__": builtins}, name, None, closure)


def _set_function_state(fn: types.FunctionType, state: tuple) -> None:
    # after creation, so a function that refers to itself (recursion, a global name) pickles
    used, values, fn.__defaults__, fn.__kwdefaults__, fn.__dict__, fn.__qualname__, fn.__module__ = state
    fn.__globals__.update(used)
    for cell, value in zip(fn.__closure__ or (), values):
        if value is not _EMPTY_CELL:
            cell.cell_contents = value


class _EmptyCell:
    def __reduce__(self) -> str:
        return "_EMPTY_CELL"


_EMPTY_CELL = _EmptyCell()


def _cell_value(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a variable not assigned yet
        return _EMPTY_CELL


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.FunctionType) and not _importable(obj):
            # by value: code (the workers run this very interpreter), the globals it names, its closure
            used = {k: obj.__globals__[k] for k in _global_names(obj.__code__) if k in obj.__globals__}
            cells = obj.__closure__
            values = [_cell_value(c) for c in cells or ()]
            state = (used, values, obj.__defaults__, obj.__kwdefaults__, obj.__dict__, obj.__qualname__,
                     obj.__module__)  # fmt: skip
            args = (marshal.dumps(obj.__code__), obj.__name__, None if cells is None else len(cells))
            return _new_function, args, state, None, None, _set_function_state
        if isinstance(obj, types.ModuleType):
            if obj.__name__ in _MAIN:
                raise pickle.PicklingError("a task refers to the main script's module itself")
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, type) and obj.__module__ in _MAIN:
            raise pickle.PicklingError(
                f"class {obj.__qualname__} is defined in {obj.__module__}, which worker processes do not run"
            )
        return NotImplemented


def dumps(obj: Any) -> bytes:
    """Pickle ``obj`` for a worker: like :func:`pickle.dumps`, but functions a worker cannot import by name
    (lambdas, closures, functions of the main script or a notebook) go by value. Raises
    :class:`ShippingError` saying why when ``obj`` cannot be sent.

    Example:
        >>> scale = 3
        >>> pickle.loads(dumps(lambda x: x * scale))(14)
        42
    """
    out = io.BytesIO()
    try:
        _Pickler(out, pickle.HIGHEST_PROTOCOL).dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError, ValueError) as exc:
        raise ShippingError(f"cannot send this task to a worker process: {exc}") from None
    return out.getvalue()
