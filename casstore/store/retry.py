"""Retries for remote stores: exponential backoff with equal jitter, a bounded total time,
and a breaker per store; tuned by ``CASSTORE_RETRY_*`` (docs/security.md).
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ..errors import CasstoreError, ConfigError, StoreError
from ..model.numerals import ascii_int
from ..model.urls import mask_url
from .remote import error_code

__all__ = ["RetryPolicy", "Breaker", "RetryStats", "STATS", "call", "is_transient", "describe"]

T = TypeVar("T")

_TRANSIENT_ERRNOS = {
    errno.EIO, getattr(errno, "EREMOTEIO", 121), errno.EBUSY, errno.EAGAIN, errno.ECONNRESET,
    errno.ECONNREFUSED, errno.ECONNABORTED, errno.ETIMEDOUT, errno.EPIPE, errno.ENETUNREACH,
    errno.EHOSTUNREACH, errno.ENETDOWN,
}
# Exception class names (anywhere in the MRO) of the HTTP stacks under fsspec backends
# (botocore, aiohttp, urllib3, http.client, fsspec) that mean "the wire failed, try again";
# obstore (S3) says it in its text: an HTTP error with no answer, or an answer cut short.
_TRANSIENT_NAMES = {
    "HTTPClientError", "EndpointConnectionError", "ConnectionClosedError", "ReadTimeoutError",
    "ConnectTimeoutError", "ResponseStreamingError", "IncompleteReadError", "ResponseParserError",
    "ClientPayloadError", "ServerDisconnectedError", "ClientConnectionError", "ClientOSError",
    "ServerTimeoutError", "FSTimeoutError", "IncompleteRead", "RemoteDisconnected",
    "ProtocolError", "ChunkedEncodingError",
}
_TRANSIENT_CODES = {
    "InternalError", "ServiceUnavailable", "SlowDown", "Throttling", "ThrottlingException",
    "RequestTimeout", "TooManyRequests", "RequestLimitExceeded",
    "BandwidthLimitExceeded", "OperationAborted",
}
_TRANSIENT_TEXT = ("SlowDown", "reduce your request rate", "Throttl", "ServiceUnavailable",
                   "InternalError", "Service Unavailable", "Internal Server Error", "HTTP error: ",
                   "error decoding response body")
def is_transient(exc: BaseException) -> bool:
    """True when retrying the same request may well succeed."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError,
                        FileExistsError, CasstoreError)):
        return False
    ce = error_code(exc)
    if ce is not None:
        code, status = ce
        return status >= 500 or status == 429 or code in _TRANSIENT_CODES or (ascii_int(code) or 0) >= 500
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    aio = sys.modules.get("asyncio")  # its TimeoutError exists only once asyncio is imported (3.10)
    if aio is not None and isinstance(exc, aio.TimeoutError):
        return True
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(exc).__mro__):
        return True
    if isinstance(exc, OSError) and exc.errno in _TRANSIENT_ERRNOS:
        return True
    text = str(exc)
    return any(t in text for t in _TRANSIENT_TEXT)


def describe(exc: BaseException) -> str:
    """One line for the last cause: the S3 code and status when there is one."""
    text = mask_url(str(exc) or type(exc).__name__).splitlines()[0][:300]
    if isinstance(exc, OSError) and exc.strerror and exc.errno is not None:
        text = mask_url(exc.strerror).splitlines()[0][:300]
    ce = error_code(exc)
    if ce is not None:
        code, status = ce
        head = f"{code} (HTTP {status})" if status else code
        return f"{head}: {text}" if code not in text else text
    if type(exc).__name__ not in text:
        return f"{type(exc).__name__}: {text}"
    return text


def _env_number(name: str, default: float, *, lo: float, hi: float, integer: bool = False) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        val = int(raw) if integer else float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if not lo <= val <= hi:
        raise ConfigError(f"{name} must be between {lo:g} and {hi:g}, got {raw!r}")
    return val


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a store call is retried."""

    attempts: int = 5  # total attempts, the first included
    base_delay: float = 0.2
    max_delay: float = 5.0
    deadline: float = 60.0  # no attempt starts later than this after the first

    @classmethod
    def from_env(cls) -> RetryPolicy:
        d = cls()
        return cls(
            attempts=int(_env_number("CASSTORE_RETRY_ATTEMPTS", d.attempts, lo=1, hi=100, integer=True)),
            base_delay=_env_number("CASSTORE_RETRY_BASE_DELAY", d.base_delay, lo=0, hi=60),
            max_delay=_env_number("CASSTORE_RETRY_MAX_DELAY", d.max_delay, lo=0, hi=600),
            deadline=_env_number("CASSTORE_RETRY_DEADLINE", d.deadline, lo=0, hi=3600),
        )

    def delay(self, retry: int) -> float:
        """Sleep before retry number ``retry`` (0-based): equal jitter over an exponential step."""
        import random  # on the first retry, not at start-up

        step = min(self.max_delay, self.base_delay * (2 ** min(retry, 30)))
        return float(step / 2 + random.random() * step / 2)


@dataclass
class RetryStats:
    """Process-wide counters (tests print them; they never change behaviour)."""

    calls: int = 0
    attempts: int = 0
    retries: int = 0
    recovered: int = 0  # calls that succeeded after at least one retry
    gave_up: int = 0
    permanent: int = 0  # calls that failed with an error a retry cannot fix
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return {k: getattr(self, k) for k in ("calls", "attempts", "retries", "recovered",
                                                  "gave_up", "permanent")}


STATS = RetryStats()


class Breaker:
    """Shared by the calls to one store: after a call gave up, later calls try only once,
    until one succeeds."""

    open = False


def call(fn: Callable[[], T], *, what: str, policy: RetryPolicy, breaker: Breaker | None = None,
         sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> T:
    """Run ``fn`` with retries. ``what`` starts the error message (``cannot read K from U``)."""
    breaker = breaker or Breaker()
    attempts = 1 if breaker.open else max(1, policy.attempts)
    start = clock()
    STATS.add(calls=1)
    n = 0
    while True:
        n += 1
        STATS.add(attempts=1)
        try:
            out = fn()
        except BaseException as exc:
            if not isinstance(exc, Exception) or not is_transient(exc):
                STATS.add(permanent=1)
                raise
            last = exc
        else:
            if n > 1:
                STATS.add(recovered=1)
            breaker.open = False
            return out
        elapsed = clock() - start
        pause = policy.delay(n - 1)
        if n >= attempts or elapsed + pause > policy.deadline:
            break
        STATS.add(retries=1)
        sleep(pause)
    STATS.add(gave_up=1)
    note = ""
    if attempts == 1 < policy.attempts:
        note = " (the store already failed earlier in this run, so no retries)"
    breaker.open = True
    raise StoreError(
        f"{what}: gave up after {n} attempt{'s' if n != 1 else ''} in {clock() - start:.1f} s{note}; "
        f"last error: {describe(last)}"
    ) from last
