"""Offline in child processes: :func:`export` marks the environment; a child arms the guard
from the ``casstore-offline.pth`` file, installs the interception once it imports an HTTP
client, and falls back to the socket guard when it cannot.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable

from .guard import env_flag as _on
from .hook import ImportWatch

__all__ = ["MARK", "wanted", "arm", "export"]

MARK = "CASSTORE_GUARD_CHILDREN"
_WATCHED = frozenset({"httpx", "httpx2", "requests", "aiohttp", "urllib3", "http.client", "httpcore", "httpcore2",
                      # modules that import a client on their way in: the guard waits for them to finish
                      "urllib.request", "xmlrpc.client", "http.server", "botocore.httpsession"})
_state = {"armed": False, "installed": False, "blocked": False}


def wanted() -> bool:
    """This process was started by a guarded parent (and is still offline, or blocks the network)."""
    return _on(MARK) and (_on("CASSTORE_OFFLINE") or _on("CASSTORE_BLOCK_NETWORK"))


def _block_network() -> None:  # the socket guard, held until the process exits
    if _state.get("blocked"):
        return
    _state["blocked"] = True
    from .socket_guard import install_socket_guard

    install_socket_guard()


def _install() -> None:
    if _state["installed"]:
        return
    _state["installed"] = True
    _WATCH.stop()
    try:
        from . import install

        install.install()  # held until the process exits
    except Exception as exc:  # noqa: BLE001 - said on stderr; the socket guard refuses instead (fail closed)
        _block_network()
        print(f"casstore: the offline guard could not be installed in this child process ({exc}); "
              "the socket guard refuses every connection to a host that is not allowed instead", file=sys.stderr)


_WATCH = ImportWatch(_WATCHED, _install)


def arm() -> None:
    """Install the guard when this process imports an HTTP client (now, if one is loaded)."""
    if _state["armed"] or not wanted():
        return
    _state["armed"] = True
    if _on("CASSTORE_BLOCK_NETWORK"):
        _block_network()
    if not _on("CASSTORE_OFFLINE"):
        return
    if any(name in sys.modules for name in _WATCHED):
        _install()
    else:
        _WATCH.start()


def export(hosts: Iterable[str] = (), block_network: bool = False) -> Callable[[], None]:
    """Tell child processes to guard themselves, allowing ``hosts`` too; returns the undo."""
    saved = {name: os.environ.get(name) for name in (MARK, "CASSTORE_ALLOWED_HOSTS", "CASSTORE_BLOCK_NETWORK")}
    os.environ[MARK] = "1"
    if block_network:
        os.environ["CASSTORE_BLOCK_NETWORK"] = "1"
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
