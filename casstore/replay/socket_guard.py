"""The socket guard: socket connects, datagrams sent to an address and the resolver refuse
every host not allowed, whatever library calls them (Unix sockets are never touched).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterable
from typing import Any

from ..errors import ClientNotSupported
from . import install as _interception
from .guard import allowed_entries, blocked_error, matches, parse_hosts, transparent

__all__ = ["install_socket_guard", "uninstall_socket_guard"]

_sock_lock = threading.Lock()
_sock_count = 0
_sock_allowed: list[frozenset[tuple[str, int | None]]] = []  # one per install, all apply
_sock_held: list[bool] = []  # one per install: it holds the interception
_sock_originals: dict[str, Any] = {}
_resolved: dict[str, str] = {}  # ip -> the allowed name it was resolved from (bounded)
_names: dict[str, str] = {}  # ip -> the last name resolved to it, for messages (bounded)
_GUARD_OPTION = "--casstore-block-network / CASSTORE_BLOCK_NETWORK=1"


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    return True


def _socketallowed_entries() -> frozenset[tuple[str, int | None]]:
    return allowed_entries().union(*_sock_allowed)


def _socket_refusal(host: str, port: int | None, name: str | None = None) -> BaseException:
    also = f" ({host})" if name and name != host else ""
    return transparent(blocked_error(name or host, port, f"the socket guard ({_GUARD_OPTION}): connection", also=also))


def _check_connect(sock: socket.socket, address: Any) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return
    host, port = str(address[0]), address[1] if len(address) > 1 else None
    entries = _socketallowed_entries()
    if matches(entries, host, port):
        return
    name = _resolved.get(host)
    if name is not None and matches(entries, name, port):
        return
    raise _socket_refusal(host, port, _names.get(host))


def _remember(table: dict[str, str], results: Any, name: str) -> None:
    if len(table) > 4096:
        table.clear()
    for *_, sockaddr in results:
        if isinstance(sockaddr, tuple) and sockaddr:
            table[str(sockaddr[0])] = name


def _lowered(host: Any) -> str | None:
    """A host name or address as looked up, or ``None`` for what the original rejects itself."""
    name = host.decode("idna") if isinstance(host, (bytes, bytearray)) else host
    return name.lower().rstrip(".") if isinstance(name, str) else None


def _check_name(host: Any, port: int | None = None) -> tuple[str, bool] | None:
    """A forward lookup's ``(name, allowed)``; refused unless allowed, an IP literal or localhost
    (which resolve without the network: the connect check decides)."""
    lowered = _lowered(host)
    if lowered is None:
        return None
    ok = matches(_socketallowed_entries(), lowered, port, any_port=True)
    if not (ok or _is_ip(lowered.strip("[]")) or lowered in ("localhost", "localhost.localdomain")):
        raise _socket_refusal(lowered, port)
    return lowered, ok


def _guarded_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        numeric_port: int | None = int(port) if port is not None else None
    except (TypeError, ValueError):
        numeric_port = None
    checked = _check_name(host, numeric_port)
    results = _sock_originals["getaddrinfo"](host, port, *args, **kwargs)
    if checked is not None:
        if checked[1]:
            _remember(_resolved, results, checked[0])
        _remember(_names, results, checked[0])
    return results


def _guarded_forward(name: str) -> Callable[[Any], Any]:
    def lookup(host: Any) -> Any:
        _check_name(host)
        return _sock_originals[name](host)

    return lookup


def _check_reverse(address: Any, port: Any = None) -> None:
    """A reverse lookup asks the resolver about an address: only an allowed one (or name)."""
    lowered = _lowered(address)
    if lowered is None:
        return
    entries = _socketallowed_entries()
    if matches(entries, lowered, port, any_port=True) or matches(entries, _resolved.get(lowered, ""), port, any_port=True):
        return
    raise _socket_refusal(lowered, port if isinstance(port, int) else None)


def _guarded_gethostbyaddr(address: Any) -> Any:
    _check_reverse(address)
    return _sock_originals["gethostbyaddr"](address)


def _guarded_getnameinfo(sockaddr: Any, flags: int) -> Any:
    if not flags & socket.NI_NUMERICHOST and isinstance(sockaddr, tuple) and sockaddr:
        _check_reverse(sockaddr[0], sockaddr[1] if len(sockaddr) > 1 else None)
    return _sock_originals["getnameinfo"](sockaddr, flags)


# the resolver's functions the socket guard replaces (getaddrinfo's is above)
_LOOKUPS: dict[str, Callable[..., Any]] = {
    "getaddrinfo": _guarded_getaddrinfo,
    "gethostbyname": _guarded_forward("gethostbyname"),
    "gethostbyname_ex": _guarded_forward("gethostbyname_ex"),
    "gethostbyaddr": _guarded_gethostbyaddr,
    "getnameinfo": _guarded_getnameinfo,
}


def _wrap_connect(original: Callable[..., Any]) -> Callable[..., Any]:
    def connect(self: socket.socket, address: Any, *args: Any, **kwargs: Any) -> Any:
        _check_connect(self, address)
        return original(self, address, *args, **kwargs)

    connect.__casstore__ = True  # type: ignore[attr-defined]
    return connect


def _wrap_sendto(original: Callable[..., Any]) -> Callable[..., Any]:
    """``sendto(data[, flags], address)`` / ``sendmsg(buffers, ancdata, flags, address)``."""
    def send(self: socket.socket, *args: Any) -> Any:
        address = args[-1] if original.__name__ == "sendto" else (args[3] if len(args) > 3 else None)
        if address is not None:
            _check_connect(self, address)
        return original(self, *args)

    send.__casstore__ = True  # type: ignore[attr-defined]
    send.__name__ = original.__name__
    return send


_SEND_ATTRS = ("sendto", "sendmsg")


def install_socket_guard(allowed_hosts: Iterable[str] = ()) -> None:
    """Block sockets to every host not allowed (reference counted); it holds the interception
    too, so a refusal inside an SDK call reaches the caller as itself."""
    global _sock_count
    try:
        _interception.install()
        held = True
    except ClientNotSupported:
        held = False
    with _sock_lock:
        _sock_held.append(held)
        _sock_allowed.append(parse_hosts(",".join(allowed_hosts)))
        if _sock_count == 0:
            _sock_originals.update(
                connect=socket.socket.__dict__.get("connect"),
                connect_ex=socket.socket.__dict__.get("connect_ex"),
                **{name: getattr(socket, name) for name in _LOOKUPS},
            )
            socket.socket.connect = _wrap_connect(socket.socket.connect)  # type: ignore[method-assign]
            socket.socket.connect_ex = _wrap_connect(socket.socket.connect_ex)  # type: ignore[method-assign]
            for attr in _SEND_ATTRS:
                if hasattr(socket.socket, attr):
                    _sock_originals[attr] = socket.socket.__dict__.get(attr)
                    setattr(socket.socket, attr, _wrap_sendto(getattr(socket.socket, attr)))
            for name, guarded in _LOOKUPS.items():
                setattr(socket, name, guarded)
        _sock_count += 1


def uninstall_socket_guard() -> None:
    """Undo one :func:`install_socket_guard`; the last one restores the originals."""
    global _sock_count
    with _sock_lock:
        if _sock_count == 0:
            return
        _sock_count -= 1
        if _sock_allowed:
            _sock_allowed.pop()
        if _sock_held.pop():
            _interception.uninstall()
        if _sock_count:
            return
        for attr in ("connect", "connect_ex", *_SEND_ATTRS):
            if attr not in _sock_originals:
                continue
            original = _sock_originals.pop(attr)
            current = socket.socket.__dict__.get(attr)
            if getattr(current, "__casstore__", False):  # someone patched over us: leave theirs
                if original is None:
                    delattr(socket.socket, attr)
                else:
                    setattr(socket.socket, attr, original)
        for name, guarded in _LOOKUPS.items():
            original_lookup = _sock_originals.pop(name)
            if getattr(socket, name) is guarded:  # someone patched over us: leave theirs
                setattr(socket, name, original_lookup)
        _resolved.clear()
