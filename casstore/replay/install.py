"""The scoped installer: client adapters patched while a ``use()`` block is active.

Reference counted: the patches go in when the first ``use()`` block is entered and come
out when the last one exits, never at import. A call made outside any ``use()`` block
goes straight to the original method (each adapter's replacement routes it).

Adapters are a registry, ``name -> patches()``: an adapter module (``.httpx``,
``.requests``, ...) provides ``patches() -> list[Patch]`` -- ``(class, attribute,
make)`` triples, ``make(original) -> replacement``, an empty list when its client is not
installed -- and is registered here in one line of :data:`ADAPTERS`. Installing applies
every adapter's patches in registry order; uninstalling restores them in reverse, except
a method someone else patched over ours meanwhile (their patch is left alone).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from . import aiohttp as _aiohttp
from . import connect as _connect
from . import httpclient as _httpclient
from . import httpx as _httpx
from . import requests as _requests
from . import threads as _threads
from . import urllib3 as _urllib3
from .policy import Patch

__all__ = ["ADAPTERS", "install", "uninstall", "installed"]

# One line per client adapter, in the order they are installed.
ADAPTERS: dict[str, Callable[[], list[Patch]]] = {
    "httpx": _httpx.patches,
    "requests": _requests.patches,
    "aiohttp": _aiohttp.patches,
    "urllib3": _urllib3.patches,  # and so botocore / boto3
    "http.client": _httpclient.patches,  # and so urllib.request
    # connections opened below every adapter (urllib3 or http.client connections used
    # directly, httpcore without httpx): refused when offline, nothing recorded
    "connections": _connect.patches,
    "threads": _threads.patches,  # threads and executor tasks started inside a block belong to it
}

_lock = threading.Lock()
_count = 0
_patches: list[tuple[type, str, Any, Any]] = []


def _set(cls: type, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = cls.__dict__.get(attr, None) or getattr(cls, attr)
    new = make(original)
    _patches.append((cls, attr, cls.__dict__.get(attr, None), new))
    setattr(cls, attr, new)


def install() -> None:
    """Count one more active ``use()`` block; patch the HTTP libraries on the first."""
    global _count
    with _lock:
        if _count == 0:
            # every adapter first says what it patches (or refuses its client's version:
            # ClientNotSupported), then all are applied: a refusal leaves nothing patched
            todo = [patch for patches in ADAPTERS.values() for patch in patches()]
            for cls, attr, make in todo:
                _set(cls, attr, make)
        _count += 1


def uninstall() -> None:
    """Count one ``use()`` block less; restore the original methods after the last."""
    global _count
    with _lock:
        if _count == 0:
            return
        _count -= 1
        if _count:
            return
        while _patches:
            cls, attr, original, new = _patches.pop()
            if cls.__dict__.get(attr) is not new:
                continue  # someone patched over us; leave their patch alone
            if original is None:
                delattr(cls, attr)
            else:
                setattr(cls, attr, original)


def installed() -> bool:
    """True while at least one ``use()`` block is active (the patches are in place)."""
    with _lock:
        return _count > 0
