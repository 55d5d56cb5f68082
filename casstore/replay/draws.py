"""The draws of one deterministic ``use()`` block: recorded ones handed out in order, live ones recorded."""

from __future__ import annotations

import random as _random
import threading
from collections.abc import Callable
from typing import Any

from ..errors import DrawMiss

__all__ = ["Draws"]

_inside = threading.local()  # set while a live draw runs (its own draws are part of it)


class Draws:
    def __init__(self, name: str, recorded: Any, *, replay: bool, record: bool) -> None:
        self.name = name
        self.recorded: list[dict[str, Any]] = [d for d in (recorded or []) if isinstance(d, dict) and "kind" in d]
        self._by_kind: dict[str, list[Any]] = {}
        for d in self.recorded:
            self._by_kind.setdefault(str(d["kind"]), []).append(d.get("value"))
        self._cursor: dict[str, int] = {}
        self.new: list[dict[str, Any]] = []
        self.replay = replay  # hand out recorded draws
        self.record = record  # record draws past the recorded ones
        self.active = True
        self._lock = threading.Lock()
        self.random = _TapeRandom(self)

    def draw(self, kind: str, live: Callable[[], Any], encode: Callable[[Any], Any], decode: Callable[[Any], Any]) -> Any:
        if getattr(_inside, "live", False):  # uuid1() reads time.time_ns(): one draw, not two
            return live()
        with self._lock:
            if self.replay:
                values = self._by_kind.get(kind, ())
                i = self._cursor.get(kind, 0)
                if i < len(values):
                    self._cursor[kind] = i + 1
                    return decode(values[i])
                if not self.record:
                    raise DrawMiss(
                        f"casstore: cassette {self.name!r} (deterministic=True): this run asked for {kind} draw "
                        f"#{i + 1} but the recording holds {len(values)}; the code draws more than when it was "
                        "recorded. Re-record it: CASSTORE_MODE=record (or record-new to keep the recorded draws)",
                        cassette=self.name,
                        kind="draw",
                        target=kind,
                    )
            _inside.live = True
            try:
                value = live()
            finally:
                _inside.live = False
            self.new.append({"kind": kind, "value": encode(value)})
            return value

    def unconsumed(self) -> dict[str, int]:
        """Recorded draws this run did not use, by kind."""
        if not self.replay:
            return {}
        with self._lock:
            left = {k: len(v) - self._cursor.get(k, 0) for k, v in self._by_kind.items()}
        return {k: n for k, n in left.items() if n > 0}

    def to_write(self, extend: bool) -> list[dict[str, Any]]:
        """``meta.draws`` of the recording: the recorded draws kept (``record-new``) and the new."""
        with self._lock:
            return [*(self.recorded if extend else []), *self.new]


class _TapeRandom(_random.Random):
    """The block's generator: ``random()`` and ``getrandbits()`` go through the tape."""

    def __init__(self, draws: Draws) -> None:
        super().__init__()
        self._draws = draws

    def random(self) -> float:
        return self._draws.draw("random.random", lambda: _random.Random.random(self), float, float)  # type: ignore[no-any-return]

    def getrandbits(self, k: int) -> int:
        # big values stay exact as decimal strings
        return self._draws.draw("random.getrandbits", lambda: _random.Random.getrandbits(self, k), str, int)  # type: ignore[no-any-return]
