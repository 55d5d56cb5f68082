"""Offline in child processes: a child of a guarded offline parent guards itself.

A parent that holds the offline guard (the pytest plugin under ``CASSTORE_OFFLINE=1``,
:func:`casstore.guard` while offline) calls :func:`export` to set ``CASSTORE_GUARD_CHILDREN=1``
(and its allowed hosts) in its environment; child processes inherit it with
``CASSTORE_OFFLINE``. A child arms the guard at start-up through the ``casstore-offline.pth``
file every install of casstore puts in site-packages (any child Python: ``subprocess``,
multiprocessing's spawn and forkserver workers), or, failing that, when it imports casstore.

Arming is cheap and lazy: it imports no HTTP client. It adds an import hook that waits for
the first HTTP client the child imports (httpx, requests, aiohttp, urllib3, http.client,
httpcore); once that import has finished (the outermost one, so no client is half
initialized), it installs the interception (:func:`.install.install`) and holds it until the
process exits, as the plugin does for a run. A process that never imports an HTTP client
pays for one environment lookup.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["MARK", "wanted", "arm", "armed", "export"]

MARK = "CASSTORE_GUARD_CHILDREN"
_FALSY = ("", "0", "false", "no", "off")
_WATCHED = frozenset({"httpx", "httpx2", "requests", "aiohttp", "urllib3", "http.client", "httpcore", "httpcore2",
                      # modules that import a client on their way in: the guard waits for them to finish
                      "urllib.request", "xmlrpc.client", "http.server", "botocore.httpsession"})
_state = {"armed": False, "installed": False, "depth": 0}


def _on(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in _FALSY


def wanted() -> bool:
    """This process was started by a guarded offline parent (and is still offline)."""
    return _on(MARK) and _on("CASSTORE_OFFLINE")


def armed() -> bool:
    return bool(_state["armed"])


class _Loader:
    """A client module's loader that installs the guard once the outermost client import ends."""

    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        _state["depth"] += 1
        try:
            self._loader.exec_module(module)
        finally:
            _state["depth"] -= 1
            module.__loader__ = self._loader  # the module keeps its own loader
            if getattr(module, "__spec__", None) is not None:
                module.__spec__.loader = self._loader
        if _state["depth"] == 0:
            parent, _, child = module.__name__.rpartition(".")
            if parent and parent in sys.modules:  # what the import system does right after us
                setattr(sys.modules[parent], child, module)
            _install()


class _Finder:
    """Sees the import of each HTTP client (first in ``sys.meta_path``) until the guard is in."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _WATCHED or _state["installed"]:
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader)
                return spec
        return None


_FINDER = _Finder()


def _install() -> None:
    if _state["installed"]:
        return
    _state["installed"] = True
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    try:
        from . import install

        install.install()  # held until the process exits
    except Exception as exc:  # noqa: BLE001 - said on stderr: the child is not guarded
        print(f"casstore: the offline guard could not be installed in this child process: {exc}", file=sys.stderr)


def arm() -> None:
    """Install the guard when this process imports an HTTP client (now, if one is loaded)."""
    if _state["armed"] or not wanted():
        return
    _state["armed"] = True
    if any(name in sys.modules for name in _WATCHED):
        _install()
    else:
        sys.meta_path.insert(0, _FINDER)


def export(hosts: Iterable[str] = ()) -> Callable[[], None]:
    """Tell child processes to guard themselves (and which more hosts are allowed); returns the undo."""
    saved = {name: os.environ.get(name) for name in (MARK, "CASSTORE_ALLOWED_HOSTS")}
    os.environ[MARK] = "1"
    extra = [h.strip() for h in hosts if h.strip()]
    if extra:
        os.environ["CASSTORE_ALLOWED_HOSTS"] = ",".join(filter(None, [saved["CASSTORE_ALLOWED_HOSTS"], *extra]))

    def undo() -> None:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    return undo
