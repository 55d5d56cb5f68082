"""Seeing a module's import end: the import hook behind lazy interception (standard library only)."""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["ImportWatch", "ready", "genuine"]


def ready(name: str) -> Any:
    """The module ``name`` once its import has finished (another thread's reports its own end), else ``None``."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None
    return module


def genuine(module: Any, name: str) -> type | None:
    """``module``'s own class ``name``, also while vcrpy's stand-in (a wrapper naming it
    ``_baseclass``, or a subclass) is in its place; ``None`` if none is found."""
    current = getattr(module, name, None)
    for cls in (current, getattr(current, "_baseclass", None), *getattr(current, "__mro__", ())):
        if isinstance(cls, type) and cls.__module__ == module.__name__ and cls.__qualname__ == name:
            return cls
    return None


class _Loader:
    """A watched module's loader: tells the watch once the outermost import ends."""

    def __init__(self, loader: Any, watch: ImportWatch) -> None:
        self._loader = loader
        self._watch = watch

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)

    def exec_module(self, module: Any) -> None:
        watch = self._watch
        local = watch.local
        local.depth = getattr(local, "depth", 0) + 1
        try:
            self._loader.exec_module(module)
        finally:
            local.depth -= 1
            own = self._loader
            while isinstance(own, _Loader):  # another watch's wrapper under ours
                own = own._loader
            module.__loader__ = own  # the module keeps its own loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = own
        # with ``nested``, every watched import's end: another thread may take this module
        # now (urllib3, while this one still runs the requests importing it) and must find it patched
        if watch.nested or local.depth == 0:
            # what the import system does right after us: the module is complete
            parent, _, child = module.__name__.rpartition(".")
            if parent and parent in sys.modules:
                setattr(sys.modules[parent], child, module)
            if getattr(module, "__spec__", None) is not None:
                module.__spec__._initializing = False
            watch.done()


class ImportWatch:
    """Calls ``done()`` after each outermost import (per thread) of a module in ``names``
    (while started): ``import requests`` reports once, after the urllib3 it imports. With
    ``nested``, after each import: after urllib3, and again after requests."""

    def __init__(self, names: frozenset[str], done: Callable[[], None], *, nested: bool = False) -> None:
        self.names = names
        self.done = done
        self.nested = nested
        self.local = threading.local()  # .depth: this thread's watched imports under way

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.names:
            return None
        finders = list(sys.meta_path)
        for finder in finders:
            find = getattr(finder, "find_spec", None)
            if isinstance(finder, ImportWatch) or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    # every watch of this name sees the import end (the first one found it)
                    for watch in reversed(finders):
                        if isinstance(watch, ImportWatch) and name in watch.names:
                            spec.loader = _Loader(spec.loader, watch)
                return spec
        return None

    def start(self) -> None:
        if self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def stop(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)
