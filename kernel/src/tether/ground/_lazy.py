"""Names a package exports without importing the modules that define them.

A package's ``__init__`` lists its public names and the module of each; the module is imported
when a name is first read (PEP 562 module ``__getattr__``), so importing one module of a package
does not run the whole package. ``tether`` and its packages export this way (``agents``,
``contracts``, ``ground``, ``loading``, ``models``, ``runtime``, ``specialists``, ``store``,
``subagents``, ``testing``; docs/startup.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib import import_module
from typing import Any

__all__ = ("lazy_exports",)


def lazy_exports(
    package: str, modules: Mapping[str, str], namespace: dict[str, Any], names: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name of ``modules`` (name -> module,
    relative to the package) is imported on first use and kept in ``namespace`` (the package's
    ``globals()``); any other name is an ``AttributeError``. ``__dir__`` lists ``names`` (the
    package's ``__all__``)."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(f".{module}", package), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(names)

    return __getattr__, __dir__
