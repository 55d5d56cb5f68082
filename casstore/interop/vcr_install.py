"""Putting the vcrpy persister (:mod:`.vcr_persister`) in effect on every vcrpy Cassette made
while installed, once vcrpy is imported; casstore's adapters leave its calls to vcrpy."""

from __future__ import annotations

import sys
import threading
from typing import Any

from ..replay.context import BYPASS
from ..replay.hook import ImportWatch, ready

__all__ = ["install", "uninstall"]

_WATCHED = "vcr.cassette"

_lock = threading.Lock()
_state: dict[str, Any] = {}


def _patch() -> None:
    from .vcr_persister import CasstorePersister

    module = sys.modules.get(_WATCHED)
    cls, context = getattr(module, "Cassette", None), getattr(module, "CassetteContextDecorator", None)
    if cls is None or context is None or _state.get("patched"):
        return
    init, enter, exit_ = cls.__init__, context.__enter__, context.__exit__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        inner = getattr(self, "_persister", None)
        if inner is not None and not isinstance(inner, CasstorePersister):
            self._persister = CasstorePersister(inner, lambda: getattr(self, "record_mode", None))

    # While a cassette is active, vcrpy answers the calls: casstore's adapters pass them on
    # (as they pass on their own live calls); a connection vcrpy opens to record is still
    # refused offline where it is opened (casstore.replay.connect).
    def __enter__(self: Any) -> Any:
        previous = BYPASS.get()
        BYPASS.set(True)
        try:
            cassette = enter(self)
        except BaseException:
            BYPASS.set(previous)
            raise
        self._casstore_bypass = previous
        return cassette

    def __exit__(self: Any, *exc_info: Any) -> Any:
        try:
            return exit_(self, *exc_info)
        finally:
            BYPASS.set(getattr(self, "_casstore_bypass", False))

    _state["patched"] = [(cls, "__init__", init, __init__), (context, "__enter__", enter, __enter__),
                         (context, "__exit__", exit_, __exit__)]
    for owner, attr, _, ours in _state["patched"]:
        setattr(owner, attr, ours)


def install() -> None:
    """Wrap the persister of each vcrpy cassette made from now on (at vcrpy's import, when
    it is not loaded yet); undone by :func:`uninstall`."""
    with _lock:
        if ready(_WATCHED) is not None:
            _patch()
        elif "watch" not in _state:
            def done() -> None:
                with _lock:
                    if ready(_WATCHED) is not None:
                        _patch()

            watch = ImportWatch(frozenset({_WATCHED}), done)
            watch.start()
            _state["watch"] = watch


def uninstall() -> None:
    with _lock:
        watch = _state.pop("watch", None)
        if watch is not None:
            watch.stop()
        for owner, attr, original, ours in reversed(_state.pop("patched", None) or []):
            if owner.__dict__.get(attr) is ours:  # restored only if still ours
                setattr(owner, attr, original)
