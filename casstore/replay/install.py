"""The scoped installer: the client adapters' patches, in while a ``use()`` block is active
(reference counted; a client imported meanwhile is patched when its import ends).
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from .hook import ImportWatch

if TYPE_CHECKING:
    from .policy import Patch

__all__ = ["ADAPTERS", "install", "uninstall", "installed"]

_HTTPCORE_BACKENDS = tuple(f"{package}._backends.{backend}" for package in ("httpcore", "httpcore2")
                           for backend in ("sync", "auto", "anyio", "trio"))

# One line per client adapter, in the order they are installed: its module (in this
# package) and the modules whose import brings its patches in ("()": always).
ADAPTERS: dict[str, tuple[str, tuple[str, ...]]] = {
    "httpx": ("httpx", ("httpx", "httpx2")),
    "requests": ("requests", ("requests",)),
    "aiohttp": ("aiohttp", ("aiohttp",)),
    "urllib3": ("urllib3", ("urllib3", "botocore.httpsession")),  # and so botocore / boto3
    "http.client": ("httpclient", ("http.client",)),  # and so urllib.request
    # connections opened below every adapter (urllib3 or http.client connections used
    # directly, httpcore without httpx): refused when offline, nothing recorded
    "connections": ("connect", ("http.client", "urllib3", "aiohttp", "ftplib", *_HTTPCORE_BACKENDS)),
    # threads and executor tasks started inside a block belong to it
    "threads": ("threads", ()),
    # the OpenAI and Anthropic SDKs: a miss reaches the test as itself, never retried
    "sdks": ("sdks", ("openai._base_client", "anthropic._base_client")),
}
_WATCHED = frozenset(name for _, clients in ADAPTERS.values() for name in clients) | {"concurrent.futures.thread"}

_lock = threading.Lock()
_count = 0
_patches: list[tuple[type | ModuleType, str, Any, Any]] = []
_applied: set[tuple[type | ModuleType, str]] = set()
_scan = threading.Lock()  # held while patches go in or out
_dirty = False  # a watched import ended: scan again


def _set(cls: type | ModuleType, attr: str, make: Callable[[Callable[..., Any]], Callable[..., Any]]) -> None:
    original = cls.__dict__.get(attr, None) or getattr(cls, attr)
    new = make(original)
    # marked, so that a patched method can be told from the original
    (new.__func__ if isinstance(new, staticmethod) else new).__casstore__ = True  # type: ignore[attr-defined]
    _patches.append((cls, attr, cls.__dict__.get(attr, None), new))
    _applied.add((cls, attr))
    setattr(cls, attr, new)


def _loaded(name: str, wait: bool) -> bool:
    """``name`` is imported (one another thread is importing: waited for with ``wait``, else it
    reports its own end; waiting in the hook could deadlock two imports)."""
    module = sys.modules.get(name)
    if module is None:
        return False
    if getattr(getattr(module, "__spec__", None), "_initializing", False):
        if not wait:
            return False
        importlib.import_module(name)
    return True


def _todo(wait: bool = False) -> list[Patch]:
    """What the adapters of the loaded clients patch that is not patched yet (or ClientNotSupported)."""
    todo: list[Patch] = []
    for module_name, clients in ADAPTERS.values():
        if clients and not any(_loaded(name, wait) for name in clients):
            continue
        adapter = importlib.import_module(f"{__package__}.{module_name}")
        todo += [patch for patch in adapter.patches() if (patch[0], patch[1]) not in _applied]
    return todo


def _rescan(wait: bool = False) -> None:
    """Patch a client imported while installed; never waits for ``_scan`` (its holder may wait
    for this import): the holder scans again."""
    global _dirty
    _dirty = True
    while _dirty:
        if not _scan.acquire(blocking=False):
            return
        try:
            _dirty = False
            if _count:
                for cls, attr, make in _todo(wait):
                    _set(cls, attr, make)
        finally:
            _scan.release()


_WATCH = ImportWatch(_WATCHED, _rescan, nested=True)  # a thread may take a nested client early


def install() -> None:
    """Count one more active ``use()`` block; patch the HTTP libraries on the first."""
    global _count
    with _lock:
        if _count == 0:
            # watched before the first scan: an import that starts while we patch is wrapped,
            # and its end rescans (below, or by its own thread once _count says installed)
            _WATCH.start()
            with _scan:
                # every loaded client's adapter first says what it patches (or refuses its
                # client's version), then all are applied: a refusal leaves nothing patched
                try:
                    todo = _todo(wait=True)
                except BaseException:
                    _WATCH.stop()
                    raise
                for cls, attr, make in todo:
                    _set(cls, attr, make)
                _count += 1
            _rescan(wait=True)  # a client whose import ended while we patched
        else:
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
        _WATCH.stop()
        with _scan:
            _applied.clear()
            while _patches:
                cls, attr, original, new = _patches.pop()
                if cls.__dict__.get(attr) is not new:
                    continue  # someone patched over us; leave their patch alone
                if original is None:
                    delattr(cls, attr)
                else:
                    setattr(cls, attr, original)


def installed() -> bool:
    """True while the patches are in place."""
    with _lock:
        return _count > 0
