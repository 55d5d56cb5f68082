"""Network guards: which hosts a live call may reach (a name or IP, optionally with a port,
or a ``*.`` suffix), and how a refusal reaches the caller.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from ..errors import CasstoreError, LiveCallBlocked
from ..model.numerals import ascii_int

__all__ = [
    "parse_hosts",
    "allowed",
    "allow_hosts",
    "offline",
    "check_live",
    "host_port",
    "origin",
    "env_flag",
    "blocked_error",
    "Escape",
    "transparent",
    "IN_SDK",
]

_FALSY = ("", "0", "false", "no", "off")
_HOW_TO_ALLOW = "CASSTORE_ALLOWED_HOSTS={host} (or [replay] allowed_hosts in casstore.toml, or pytest --casstore-allowed-hosts={host})"


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in _FALSY


def offline() -> bool:  # read now: the environment may change during a run
    return env_flag("CASSTORE_OFFLINE")


@functools.lru_cache(maxsize=64)
def parse_hosts(text: str) -> frozenset[tuple[str, int | None]]:
    """``"a.com, 127.0.0.1:8080, [::1]"`` -> ``{("a.com", None), ("127.0.0.1", 8080), ("::1", None)}``."""
    out: set[tuple[str, int | None]] = set()
    for raw in text.replace(";", ",").split(","):
        item = raw.strip().lower()
        if not item:
            continue
        host, port = item, None
        if item.startswith("["):  # [v6] or [v6]:port
            end = item.find("]")
            host, rest = item[1:end], item[end + 1 :]
            if rest.startswith(":") and (n := ascii_int(rest[1:])) is not None:  # not "²", "٨٠", 5000 digits
                port = n
            elif rest:  # "[::1]:x" is no port: the entry matches nothing, as "host:x" does (not every port)
                host = item
        elif item.count(":") == 1:  # host:port (a bare IPv6 address has several colons)
            name, _, p = item.partition(":")
            if (n := ascii_int(p)) is not None:
                host, port = name, n
        out.add((host, port))
        if host == "localhost":  # what localhost resolves to, for the socket guard
            out.update({("127.0.0.1", port), ("::1", port)})
    return frozenset(out)


_registered: frozenset[tuple[str, int | None]] = frozenset()  # pytest option + config, for a run
_registered_lock = threading.Lock()


def allow_hosts(hosts: Iterable[str] | str) -> Callable[[], None]:
    """Allow more hosts process-wide (the pytest plugin: option and config); returns the undo."""
    global _registered
    text = hosts if isinstance(hosts, str) else ",".join(hosts)
    added = parse_hosts(text) - _registered
    with _registered_lock:
        _registered = _registered | added

    def undo() -> None:
        global _registered
        with _registered_lock:
            _registered = _registered - added

    return undo


def allowed_entries(extra: Iterable[str] = ()) -> frozenset[tuple[str, int | None]]:
    found = _registered | parse_hosts(os.environ.get("CASSTORE_ALLOWED_HOSTS", ""))
    extra_text = ",".join(extra)
    return found | parse_hosts(extra_text) if extra_text else found


def matches(entries: frozenset[tuple[str, int | None]], host: str, port: int | None, *, any_port: bool = False) -> bool:
    host = host.lower().strip("[]").rstrip(".")
    for name, p in entries:
        if p is not None and p != port and not any_port:
            continue
        if name == host or (name.startswith("*.") and host.endswith(name[1:])):
            return True
    return False


def allowed(host: str, port: int | None = None, extra: Iterable[str] = ()) -> bool:
    """Whether a live call to ``host[:port]`` may go out."""
    entries = allowed_entries(extra)
    return bool(entries) and matches(entries, host, port)


def blocked_error(host: str, port: int | None, what: str, *, also: str = "") -> LiveCallBlocked:
    """The one-line refusal: casstore, the host, why, and how to allow it."""
    shown = f"[{host}]" if ":" in host else host
    where = (f"{shown}:{port}" if port is not None else shown) + also
    err = LiveCallBlocked(f"casstore: {what} to {where} blocked; to allow it: {_HOW_TO_ALLOW.format(host=shown)}")
    err.host = host  # type: ignore[attr-defined]
    err.port = port  # type: ignore[attr-defined]
    return err


def host_port(url: str) -> tuple[str, int | None]:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if port is None:
        port = {"http": 80, "https": 443, "ws": 80, "wss": 443}.get(parts.scheme.lower())
    return (parts.hostname or ""), port


def origin(scheme: str, host: Any, port: Any) -> str:
    """``scheme://host[:port]``: an IPv6 address in brackets, no port when it is the scheme's default."""
    shown = str(host)
    if ":" in shown and not shown.startswith("["):
        shown = f"[{shown}]"
    if port is None or port == {"http": 80, "https": 443}.get(scheme):
        return f"{scheme}://{shown}"
    return f"{scheme}://{shown}:{port}"


def check_live(url: str, context: str, extra: Iterable[str] = ()) -> None:
    """Raise :class:`LiveCallBlocked` naming ``context`` when offline and ``url``'s host is not allowed."""
    if not offline():
        return
    host, port = host_port(url)
    if allowed(host, port, extra):
        return
    raise blocked_error(host, port, f"CASSTORE_OFFLINE=1: {context}")


# The thread in which an OpenAI or Anthropic SDK client is sending a request (see .sdks):
# there a casstore error travels through the SDK as Escape, which its retry loop does not
# catch (a thread started meanwhile inherits the value and raises the error itself).
IN_SDK: ContextVar[int] = ContextVar("casstore_in_sdk", default=0)


class Escape(BaseException):
    """A casstore error on its way out of an SDK call: not an ``Exception``, so the SDK's retry
    loop does not catch it."""

    def __init__(self, error: CasstoreError) -> None:
        super().__init__(error)
        self.error = error


def transparent(exc: CasstoreError) -> BaseException:
    """What to raise for ``exc`` where a client sees it: ``exc``, or under an SDK call an :class:`Escape`."""
    return Escape(exc) if IN_SDK.get() == threading.get_ident() else exc
