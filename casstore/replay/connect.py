"""Offline refusal where connections open, below the adapters (``http.client``, urllib3,
httpcore, aiohttp's connector, ftplib): where the socket goes and a tunnel's origin.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from ..errors import CasstoreError
from .context import BYPASS, IN_TOOL, active
from .guard import check_live, offline, origin, transparent
from .hook import genuine, ready
from .policy import Patch, refuse_unrecorded

__all__ = ["check_connection", "patches"]


def _url(host: Any, port: Any) -> str:
    return origin("tcp", host, port)


def check_connection(host: Any, port: Any, opener: str, origin: tuple[Any, Any] | None = None,
                     proxy: bool = False) -> None:
    """Raise ``LiveCallBlocked`` when a connection to ``host:port`` may not be opened now
    (``origin``: where a tunnel through it leads; ``proxy``: ``host`` is a proxy)."""
    bypass = BYPASS.get()  # an adapter's live call: its own host was already let through
    session = active(IN_TOOL) or active()
    strict = session is not None and not session.offline and session.mode == "replay"
    if not (session.offline if session is not None else offline()) and not strict:
        return
    via = proxy or origin is not None or bypass
    what = (f"live call through the proxy {_url(host, port)[6:]} (the proxy must be allowed too): connection opened by {opener}"
            if via else f"connection opened by {opener}")
    checks = [(host, port, what)]
    if origin is not None and not bypass:
        checks.append((*origin, f"tunnel opened by {opener} through the proxy {_url(host, port)[6:]}"))
    if strict:  # strict replay goes live only to allowed hosts, below the adapters too
        assert session is not None
        for h, p, text in checks:
            refuse_unrecorded(session, _url(h, p), text)
        return
    try:
        for h, p, text in checks:
            if session is not None:
                session.refuse_live(_url(h, p), text)
            else:
                check_live(_url(h, p), f"{text} outside any casstore.use() block")
    except CasstoreError as exc:
        raise transparent(exc) from None


def _connect(opener: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def connect(self: Any, *args: Any, **kwargs: Any) -> Any:
        tunnel = getattr(self, "_tunnel_host", None)  # a tunnel's origin, through a proxy
        origin = (tunnel, getattr(self, "_tunnel_port", None)) if tunnel else None
        check_connection(self.host, self.port, opener, origin, proxy=getattr(self, "proxy", None) is not None)
        return original(self, *args, **kwargs)

    return connect


def _connect_tcp(opener: str, original: Callable[..., Any]) -> Callable[..., Any]:
    # checked before the call: an async backend's coroutine is awaited at once by its caller
    def connect_tcp(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        check_connection(host, port, opener)
        return original(self, host, port, *args, **kwargs)

    return connect_tcp


# (backend module, class) -- the network backends httpcore connects through
_BACKENDS = (
    ("sync", "SyncBackend"),
    ("auto", "AutoBackend"),
    ("anyio", "AnyIOBackend"),
    ("trio", "TrioBackend"),  # only when already loaded: importing it imports trio
)


def _httpcore(package: str) -> list[Patch]:
    """The loaded backends (the installer patches those httpcore imports later)."""
    out: list[Patch] = []
    for module_name, cls_name in _BACKENDS:
        module = ready(f"{package}._backends.{module_name}")
        cls = getattr(module, cls_name, None)
        if isinstance(cls, type) and "connect_tcp" in cls.__dict__:
            out.append((cls, "connect_tcp", functools.partial(_connect_tcp, package)))
    return out


def patches() -> list[Patch]:
    """What the installer patches, of the modules loaded."""
    out: list[Patch] = []
    # the modules' own classes, not the stand-ins vcrpy puts in their place during a cassette
    client = ready("http.client")
    connection = genuine(client, "HTTPConnection") if client is not None else None
    if connection is not None:
        out.append((connection, "connect", functools.partial(_connect, "http.client")))
    u3c = ready("urllib3.connection")
    if u3c is not None:
        for name in ("HTTPConnection", "HTTPSConnection"):
            cls = genuine(u3c, name)
            if cls is not None and (name == "HTTPConnection" or "connect" in cls.__dict__):
                out.append((cls, "connect", functools.partial(_connect, "urllib3")))
    for package in ("httpcore", "httpcore2"):
        out.extend(_httpcore(package))
    ftplib = ready("ftplib")  # urllib.request's ftp:// goes through it
    if ftplib is not None:
        out.append((ftplib.FTP, "connect", _ftp_connect))
    connector = ready("aiohttp.connector")
    if connector is not None:
        out.append((connector.BaseConnector, "connect", _aiohttp_connect))
    return out


def _aiohttp_connect(original: Callable[..., Any]) -> Callable[..., Any]:
    """aiohttp: a call through a proxy (``proxy=``, or the environment's with ``trust_env``)."""
    async def connect(self: Any, req: Any, *args: Any, **kwargs: Any) -> Any:
        proxy = getattr(req, "proxy", None)
        if proxy is not None:
            check_connection(proxy.host, proxy.port, "aiohttp", (req.url.host, req.url.port), proxy=True)
        return await original(self, req, *args, **kwargs)

    return connect


def _ftp_connect(original: Callable[..., Any]) -> Callable[..., Any]:
    """ftplib (``ftp://``): never recorded; refused offline and in strict replay."""
    def connect(self: Any, host: str = "", port: int = 0, *args: Any, **kwargs: Any) -> Any:
        name, number = host or self.host, port or self.port or 21
        session = active(IN_TOOL) or active()
        if session is not None and not BYPASS.get():
            refuse_unrecorded(session, f"ftp://{_url(name, number)[6:]}", "ftp connection")
        check_connection(name, number, "ftplib")
        return original(self, host, port, *args, **kwargs)

    return connect
