"""The one lifecycle of a server the tests run on 127.0.0.1 (a thread serving until stopped).

``LLMServer`` and ``FaultProxy`` subclass :class:`LoopbackServer`: ``start()`` serves in a
daemon thread, ``stop()`` shuts the server down, closes its socket and joins the thread,
and ``with server:`` does both.
"""

from __future__ import annotations

import socketserver
import threading
from typing import Any

__all__ = ["LoopbackServer"]


class LoopbackServer:
    """Subclasses set ``self._server`` (a bound ``socketserver.BaseServer``) in ``_bind()``."""

    _server: Any = None
    _thread: threading.Thread | None = None
    thread_name = "loopback-server"

    def _bind(self) -> socketserver.BaseServer:  # pragma: no cover - every subclass binds
        raise NotImplementedError

    def start(self) -> Any:
        if self._server is None:
            self._server = self._bind()
        self._thread = threading.Thread(target=self._server.serve_forever, name=self.thread_name,
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            if self._thread is not None:
                self._thread.join(timeout=5)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
