"""A real headless browser for page tests: Debian's ``chromium`` driven over the DevTools
protocol on a pipe (``--remote-debugging-pipe``: fd 3 in, fd 4 out, NUL-framed JSON), stdlib only.

It records every network request the page makes and every dialog it opens, evaluates
expressions after the page's scripts ran, and takes screenshots. All traffic is sent to a
proxy on a closed loopback port, so nothing could leave the machine either way.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

__all__ = ["CHROMIUM", "Browser", "needs_chromium"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="needs Debian's chromium (apt-get install chromium; .ci/run installs it)")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed when the with block ends


class Browser:
    def __init__(self) -> None:
        assert CHROMIUM is not None
        self._profile = tempfile.mkdtemp(prefix="casstore-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        # the child's fd 3 reads commands, fd 4 writes answers (moved above 4 first, so
        # that neither dup2 overwrites the other pipe)
        hi_r, hi_w = fcntl.fcntl(to_child_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_child_w, fcntl.F_DUPFD, 10)

        def fds() -> None:
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
             f"--user-data-dir={self._profile}", f"--proxy-server=http://127.0.0.1:{_closed_port()}",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", "--window-size=1280,900", "about:blank"],
            preexec_fn=fds, pass_fds=(3, 4, hi_r, hi_w),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for fd in {to_child_r, from_child_w, hi_r, hi_w}:
            os.close(fd)
        self._buf = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Network", "Runtime"):
            self.send(f"{domain}.enable", session=True)

    # -- the protocol ------------------------------------------------------------------------
    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not answer")
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed its pipe")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)  # type: ignore[no-any-return]

    def send(self, method: str, params: dict[str, Any] | None = None, *, session: bool = False,
             timeout: float = 30) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        os.write(self._to_child, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            m = self._read(deadline)
            if m.get("id") == self._next:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})  # type: ignore[no-any-return]
            self._event(m)

    def _event(self, m: dict[str, Any]) -> None:
        self.events.append(m)
        if m.get("method") == "Page.javascriptDialogOpening":
            os.write(self._to_child, json.dumps({"id": 0, "method": "Page.handleJavaScriptDialog", "sessionId": self.session,
                                                  "params": {"accept": False}}).encode() + b"\0")

    # -- what tests use ----------------------------------------------------------------------
    def open(self, path: Path, *, timeout: float = 30) -> float:
        """Load ``path`` and wait until its script marked the page ready; the seconds it took."""
        url = path.resolve().as_uri()
        self.eval("document.documentElement && document.documentElement.removeAttribute('data-ready')")
        start = time.monotonic()
        self.send("Page.navigate", {"url": url}, session=True)
        ready = (f"location.href === {json.dumps(url)} && !!document.documentElement"
                 " && document.documentElement.getAttribute('data-ready') === '1'")
        while time.monotonic() - start < timeout:
            if self.eval(ready) is True:
                return time.monotonic() - start
            time.sleep(0.01)
        raise TimeoutError(f"{path.name} never became ready")

    def eval(self, expression: str) -> Any:
        r = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True}, session=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def dialogs(self) -> list[str]:
        return [e["params"].get("message", "") for e in self.events if e.get("method") == "Page.javascriptDialogOpening"]

    def screenshot(self) -> bytes:
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"}, session=True)["data"])

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout=5)
        except (OSError, EOFError, TimeoutError, RuntimeError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_child)
        os.close(self._from_child)
        shutil.rmtree(self._profile, ignore_errors=True)
