"""Network guards: which hosts a live call may reach, and the socket-level guard.

Two guards, both off until something turns them on (never at import):

* **offline** (``CASSTORE_OFFLINE=1``): every live call through an intercepted client
  (httpx, requests, aiohttp, urllib3, http.client) raises :class:`LiveCallBlocked`,
  inside a ``use()`` block or outside one, unless its host is allowed. The clients'
  interception is what enforces it (:func:`check_live`); outside every block it is in
  place while a block is active anywhere in the process, or while :func:`guard` / the
  pytest plugin holds it for a whole run.
* **socket guard** (:func:`block_network`, pytest ``--casstore-block-network``,
  ``CASSTORE_BLOCK_NETWORK=1``): ``socket.socket.connect`` / ``connect_ex``, datagrams sent
  to an address (``sendto`` / ``sendmsg``) and
  the resolver (``socket.getaddrinfo``, ``gethostbyname``, ``gethostbyname_ex``, and the
  reverse lookups ``gethostbyaddr`` / ``getnameinfo``) refuse every host that is not
  allowed, whatever library calls
  them (``socket.create_connection``, asyncio's ``loop.create_connection`` and
  ``sock_connect`` all go through them). Unix sockets and ``socketpair`` are never
  touched. A guarded parent's child processes hold it too (:mod:`.child`).

Allowed hosts: ``CASSTORE_ALLOWED_HOSTS`` (read at each check), ``[replay] allowed_hosts``
in the config and ``--casstore-allowed-hosts`` (registered with :func:`allow_hosts`), and
those a ``use()`` block's project config names. An entry is a host name or an IP
(``api.internal``, ``127.0.0.1``, ``::1``), optionally with a port (``127.0.0.1:8080``,
``[::1]:8080``), or a ``*.`` suffix (``*.internal``). Nothing is allowed by default,
loopback included; ``localhost`` also allows ``127.0.0.1`` and ``::1`` at the socket level.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any
from urllib.parse import urlsplit

from ..errors import CasstoreError, ClientNotSupported, LiveCallBlocked
from ..model.numerals import ascii_int
from . import install as _interception
from .context import IN_SDK

__all__ = [
    "parse_hosts",
    "allowed",
    "allow_hosts",
    "offline",
    "check_live",
    "host_port",
    "env_flag",
    "blocked_error",
    "Escape",
    "transparent",
    "install_socket_guard",
    "uninstall_socket_guard",
    "socket_guard_installed",
    "block_network",
]

_FALSY = ("", "0", "false", "no", "off")
_HOW_TO_ALLOW = "CASSTORE_ALLOWED_HOSTS={host} (or [replay] allowed_hosts in casstore.toml, or pytest --casstore-allowed-hosts={host})"


def env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in _FALSY


def offline() -> bool:
    """``CASSTORE_OFFLINE`` is set (read now: the environment may change during a run)."""
    return env_flag("CASSTORE_OFFLINE")


# -- allowed hosts ------------------------------------------------------------------------------


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


def _entries(extra: Iterable[str] = ()) -> frozenset[tuple[str, int | None]]:
    found = _registered | parse_hosts(os.environ.get("CASSTORE_ALLOWED_HOSTS", ""))
    extra_text = ",".join(extra)
    return found | parse_hosts(extra_text) if extra_text else found


def _match(entries: frozenset[tuple[str, int | None]], host: str, port: int | None, *, any_port: bool = False) -> bool:
    host = host.lower().strip("[]").rstrip(".")
    for name, p in entries:
        if p is not None and p != port and not any_port:
            continue
        if name == host or (name.startswith("*.") and host.endswith(name[1:])):
            return True
    return False


def allowed(host: str, port: int | None = None, extra: Iterable[str] = ()) -> bool:
    """Whether a live call to ``host[:port]`` may go out."""
    entries = _entries(extra)
    return bool(entries) and _match(entries, host, port)


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


def check_live(url: str, context: str, extra: Iterable[str] = ()) -> None:
    """Raise :class:`LiveCallBlocked` when offline and ``url``'s host is not allowed.

    ``context`` says which call it was (``"live GET https://… outside any use() block"``).
    """
    if not offline():
        return
    host, port = host_port(url)
    if allowed(host, port, extra):
        return
    raise blocked_error(host, port, f"CASSTORE_OFFLINE=1: {context}")


# -- errors the SDKs pass through untouched ----------------------------------------------------------


class Escape(BaseException):
    """A casstore error on its way out of an SDK call (:mod:`.sdks` re-raises ``error``).

    The OpenAI and Anthropic SDKs catch every ``Exception`` their HTTP client raises, retry
    it with backoff and raise ``APIConnectionError`` instead (only their newest versions
    let their own errors through). Not an ``Exception``, this passes through untouched.
    """

    def __init__(self, error: CasstoreError) -> None:
        super().__init__(error)
        self.error = error


def transparent(exc: CasstoreError) -> BaseException:
    """What to raise for ``exc`` where a client sees it: ``exc`` itself, or, under an SDK
    call (:data:`.context.IN_SDK`), an :class:`Escape` that the SDK re-raises as ``exc``
    at once: no retry, no backoff, no wrapping."""
    return Escape(exc) if IN_SDK.get() == threading.get_ident() else exc


# -- the socket guard -----------------------------------------------------------------------------

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


def _socket_entries() -> frozenset[tuple[str, int | None]]:
    found = _entries()
    for extra in _sock_allowed:
        found = found | extra
    return found


def _socket_refusal(host: str, port: int | None, name: str | None = None) -> BaseException:
    also = f" ({host})" if name and name != host else ""
    return transparent(blocked_error(name or host, port, f"the socket guard ({_GUARD_OPTION}): connection", also=also))


def _check_connect(sock: socket.socket, address: Any) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6) or not isinstance(address, tuple):
        return
    host, port = str(address[0]), address[1] if len(address) > 1 else None
    entries = _socket_entries()
    if _match(entries, host, port):
        return
    name = _resolved.get(host)
    if name is not None and _match(entries, name, port):
        return
    raise _socket_refusal(host, port, _names.get(host))


def _remember(table: dict[str, str], results: Any, name: str) -> None:
    if len(table) > 4096:
        table.clear()
    for *_, sockaddr in results:
        if isinstance(sockaddr, tuple) and sockaddr:
            table[str(sockaddr[0])] = name


def _guarded_getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
    original = _sock_originals["getaddrinfo"]
    name = host.decode("idna") if isinstance(host, (bytes, bytearray)) else host
    if name is None or not isinstance(name, str):
        return original(host, port, *args, **kwargs)
    lowered = name.lower().rstrip(".")
    try:
        numeric_port: int | None = int(port) if port is not None else None
    except (TypeError, ValueError):
        numeric_port = None
    ok = _match(_socket_entries(), lowered, numeric_port, any_port=True)
    # IP literals and localhost resolve without the network: the connect check decides
    if not (ok or _is_ip(lowered.strip("[]")) or lowered in ("localhost", "localhost.localdomain")):
        raise _socket_refusal(lowered, numeric_port)
    results = original(host, port, *args, **kwargs)
    if ok:
        _remember(_resolved, results, lowered)
    _remember(_names, results, lowered)
    return results


def _check_name(host: Any) -> None:
    """A forward lookup (``gethostbyname``, ``gethostbyname_ex``): as ``getaddrinfo``."""
    name = host.decode("idna") if isinstance(host, (bytes, bytearray)) else host
    if not isinstance(name, str):
        return  # the original raises its own TypeError
    lowered = name.lower().rstrip(".")
    if not (_match(_socket_entries(), lowered, None, any_port=True) or _is_ip(lowered.strip("[]"))
            or lowered in ("localhost", "localhost.localdomain")):
        raise _socket_refusal(lowered, None)


def _guarded_gethostbyname(host: Any) -> Any:
    _check_name(host)
    return _sock_originals["gethostbyname"](host)


def _guarded_gethostbyname_ex(host: Any) -> Any:
    _check_name(host)
    return _sock_originals["gethostbyname_ex"](host)


def _check_reverse(address: Any, port: Any = None) -> None:
    """A reverse lookup asks the resolver about an address: only an allowed one (or name)."""
    name = address.decode("idna") if isinstance(address, (bytes, bytearray)) else address
    if not isinstance(name, str):
        return
    lowered = name.lower().rstrip(".")
    entries = _socket_entries()
    if _match(entries, lowered, port, any_port=True) or _match(entries, _resolved.get(lowered, ""), port, any_port=True):
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
    "gethostbyname": _guarded_gethostbyname,
    "gethostbyname_ex": _guarded_gethostbyname_ex,
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
    """``sendto(data[, flags], address)`` / ``sendmsg(buffers, ancdata, flags, address)``:
    a datagram sent without ``connect`` goes to the address it names."""
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
    """Block sockets to every host not allowed (reference counted; ``allowed_hosts`` add
    to the environment's and the registered ones until the matching uninstall).

    It also holds casstore's interception (:mod:`.install`; calls outside every block pass
    through it unchanged), so that a refusal inside an SDK call reaches the caller as itself
    (:mod:`.sdks`); a client casstore cannot intercept leaves the socket guard alone.
    """
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


def socket_guard_installed() -> bool:
    with _sock_lock:
        return _sock_count > 0


@contextlib.contextmanager
def block_network(allowed_hosts: Iterable[str] = ()) -> Iterator[None]:
    """``with casstore.block_network(allowed_hosts=["127.0.0.1"]):`` — the socket guard
    for a block of code (what ``--casstore-block-network`` does for a pytest run); child
    processes started inside hold it too."""
    from .child import export

    hosts = tuple(allowed_hosts)
    install_socket_guard(hosts)
    undo = export(hosts, block_network=True)
    try:
        yield
    finally:
        undo()
        uninstall_socket_guard()
