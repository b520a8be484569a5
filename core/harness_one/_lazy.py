"""Modules imported on first use, so ``import harness_one`` stays cheap (see docs/architecture.md)."""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import Any

__all__ = ["lazy_attribute", "lazy_module"]


class _LazyModule(ModuleType):
    """Stands in for module ``target`` in ``owner``'s globals until an attribute is read.

    The first read imports the module and rebinds the global to it, so later reads cost
    nothing extra.
    """

    def __init__(self, target: str, owner: str, binding: str) -> None:
        super().__init__(target)
        self._target = target
        self._owner = owner
        self._binding = binding

    def __getattr__(self, attr: str) -> Any:
        module = importlib.import_module(self._target)
        owner = sys.modules.get(self._owner)
        if owner is not None and vars(owner).get(self._binding) is self:
            setattr(owner, self._binding, module)
        return getattr(module, attr)


def lazy_module(target: str, owner: str, binding: str | None = None) -> Any:
    """A stand-in for ``import target`` in module ``owner`` (bound as ``binding``, default the last dotted part)."""
    return _LazyModule(target, owner, binding or target.rpartition(".")[2])


def lazy_attribute(target: str, attr: str, owner: str, binding: str) -> Any:
    """A callable standing in for ``target.attr`` in ``owner``: the first call imports and rebinds it.

    ``None`` when ``attr`` is missing from ``target`` is not known until imported; callers that
    need that check import the module themselves.
    """

    def first_call(*args: Any, **kwargs: Any) -> Any:
        real = getattr(importlib.import_module(target), attr)
        owner_module = sys.modules.get(owner)
        if owner_module is not None and vars(owner_module).get(binding) is first_call:
            setattr(owner_module, binding, real)
        return real(*args, **kwargs)

    first_call.__name__ = attr
    first_call.__qualname__ = f"{target}.{attr}"
    return first_call
