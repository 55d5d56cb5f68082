"""The replay library front: ``casstore.use()``, ``casstore.tool()``, ``guard()`` and
``block_network()``.

Mode resolution, strongest first: pytest ``--casstore-mode`` → ``CASSTORE_MODE`` →
``use(mode=...)`` → config ``mode`` → ``replay`` when ``CI`` is set, else ``auto``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar, overload

from ..errors import UsageError
from ..model.cassette import Cassette, load_file
from ..model.identity import Normalizer, jsonable
from ..model.names import name_from_test_id, validate_name
from ..project import Project
from .codec import ReplayedError, encode_exception, tool_outcome
from .context import CURRENT, IN_TOOL, active
from .drift import DriftItem, DriftWarning
from .faults import check_faults
from .gate import check_entry
from .guard import allow_hosts, env_flag
from .install import install, uninstall
from .modes import MODES
from .nondet import activate as activate_draws
from .nondet import deactivate as deactivate_draws
from .options import Options, parse_timing, resolve_timing
from .session import Session
from .socket_guard import install_socket_guard, uninstall_socket_guard
from .writer import file_stamp

__all__ = [
    "use",
    "tool",
    "guard",
    "Guard",
    "Use",
    "Session",
    "DriftItem",
    "DriftWarning",
    "ReplayedError",
    "MODES",
    "resolve_mode",
    "current_session",
]

F = TypeVar("F", bound=Callable[..., Any])

_forced_mode: str | None = None  # set by the pytest plugin from --casstore-mode
_forced_all_played = False  # set by the pytest plugin from --casstore-all-played


def set_forced_all_played(on: bool) -> None:
    """Used by the pytest plugin: ``--casstore-all-played`` turns ``all_played`` on everywhere."""
    global _forced_all_played
    _forced_all_played = bool(on)


def set_forced_mode(mode: str | None) -> None:
    """Used by the pytest plugin: ``--casstore-mode`` beats every other source."""
    global _forced_mode
    if mode is not None:
        _check_mode(mode, "--casstore-mode")
    _forced_mode = mode


def _check_mode(mode: str, source: str) -> str:
    if mode not in MODES:
        raise UsageError(f"{source}: unknown casstore mode {mode!r}; use one of {', '.join(MODES)}")
    return mode


def resolve_mode(explicit: str | None = None, config_mode: str | None = None) -> tuple[str, str]:
    """``(mode, where it came from)`` following the documented order."""
    candidates = (
        (_forced_mode, "--casstore-mode"),
        (os.environ.get("CASSTORE_MODE", "").strip() or None, "CASSTORE_MODE"),
        (explicit, "use(mode=...)"),
        (config_mode, "config"),
    )
    for mode, source in candidates:
        if mode:
            return _check_mode(mode, source), source
    return ("replay", "default (CI is set)") if env_flag("CI") else ("auto", "default")


def current_session() -> Session | None:
    """The session of the innermost active ``use()`` block in this context, if any."""
    return active()


def _locate(name: str, path: Path | None, cassette_dir: Path | None, project: Any, load: bool,
            mode: str) -> tuple[Cassette | None, Path, Any]:
    """``(cassette or None, working copy path, its stamp taken before reading)``: explicit
    path → dir → project."""
    if path is not None or cassette_dir is not None or project is None:
        target = path if path is not None else (cassette_dir or Path.cwd() / "tests" / "cassettes") / f"{name}.json"
        stamp = file_stamp(target)
        cassette = load_file(target) if load and target.is_file() else None
        return cassette, target, stamp
    target = project.working_copy_path(name)
    stamp = file_stamp(target)
    prefer = mode in ("record-new", "refresh")
    return (project.resolve_cassette(name, prefer_working_copy=prefer) if load else None), target, stamp


class _Block:
    """A context manager (``with`` / ``async with``) that is also a decorator (sync and async)."""

    def __enter__(self) -> Any:
        raise NotImplementedError

    def __exit__(self, *exc: Any) -> None:
        raise NotImplementedError

    def _fresh(self) -> _Block:  # the block a decorated call enters
        return self

    async def __aenter__(self) -> Any:
        return self.__enter__()

    async def __aexit__(self, *exc: Any) -> None:
        self.__exit__(*exc)

    def __call__(self, fn: F) -> F:
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                async with self._fresh():
                    return await fn(*args, **kwargs)

            return async_wrapper  # type: ignore[return-value]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with self._fresh():
                return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]


class Use(_Block):
    """Record or replay the HTTP, LLM and tool calls made inside a block or function (a
    context manager, sync or async, and a decorator); its options: docs/replay.md."""

    def __init__(
        self,
        name: str | None = None,
        mode: str | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        cassette_dir: str | os.PathLike[str] | None = None,
        fallback: str | None = None,
        normalizer: Normalizer | None = None,
        redaction: dict[str, Any] | None = None,
        timing: str | float | None = None,
        all_played: bool = False,
        deterministic: bool = False,
        faults: Mapping[int | str, Any] | None = None,
        scorer: Callable[[str, str], float] | None = None,
        threshold: float | None = None,
    ) -> None:
        if name is not None:
            validate_name(name)
        if mode is not None:
            _check_mode(mode, "use(mode=...)")
        if fallback not in (None, "replay"):
            raise UsageError(f"use(fallback=...): only 'replay' is supported, got {fallback!r}")
        self.name = name
        self.mode = mode
        self.path = Path(path) if path is not None else None
        self.cassette_dir = Path(cassette_dir) if cassette_dir is not None else None
        self.fallback = fallback
        self.normalizer = normalizer
        self.redaction = redaction
        if timing is not None:
            parse_timing(timing, "use(timing=...)")  # a bad value fails here, not at block entry
        self.timing = timing
        self.all_played = all_played
        self.deterministic = deterministic
        self.faults = check_faults(faults)
        if scorer is not None and not callable(scorer):
            raise UsageError("use(scorer=...): a callable (recorded_text, live_text) -> float in [0, 1]")
        if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                      or not 0 <= threshold <= 1):
            raise UsageError(f"use(threshold=...): a number from 0 to 1, got {threshold!r}")
        self.scorer = scorer
        self.threshold = None if threshold is None else float(threshold)
        self.session: Session | None = None  # the last block's session

    @property
    def fingerprint(self) -> str | None:
        """The run fingerprint of the last block (see :attr:`Session.fingerprint`)."""
        return self.session.fingerprint if self.session is not None else None

    def _start(self) -> Session:
        name = self.name
        if name is None:
            test_id = (os.environ.get("PYTEST_CURRENT_TEST") or "").rsplit(" (", 1)[0]
            if not test_id:
                raise UsageError("casstore.use() needs a cassette name outside pytest")
            name = name_from_test_id(test_id)
        project = Project.discover()
        config = getattr(project, "config", None)
        mode, source = resolve_mode(self.mode, getattr(config, "mode", None))
        needs_cassette = mode != "record" and (mode != "live" or self.fallback == "replay")
        cassette, target, stamp = _locate(name, self.path, self.cassette_dir, project, needs_cassette, mode)
        changed = None
        if project is not None and self.path is None and self.cassette_dir is None and cassette is not None \
                and mode not in ("record-new", "refresh") and name in project.load_lock().pins:
            changed = functools.partial(project.changed_working_copy, name)
        redaction = self.redaction if self.redaction is not None else (getattr(config, "redaction", None) or {})
        session = Session(
            name,
            mode,
            cassette=cassette,
            write_path=target,
            offline=env_flag("CASSTORE_OFFLINE"),
            fallback=self.fallback,
            normalizer=self.normalizer,
            redaction_config=redaction,
            mode_source=source,
            git_root=getattr(project, "root", None) or Path.cwd(),
            path_stamp=stamp,
            changed_working_copy=changed,
            allowed_hosts=tuple(getattr(config, "allowed_hosts", ()) or ()),
            options=Options(
                timing=resolve_timing(self.timing, getattr(config, "replay", {}).get("timing") if config else None),
                all_played=self.all_played or _forced_all_played,
                deterministic=self.deterministic,
                faults=self.faults,
                scorer=self.scorer,
                threshold=self.threshold,
            ),
        )
        check_entry(name, mode, session.effective_mode, source)  # before any network call
        return session

    # context manager ------------------------------------------------------------------
    def __enter__(self) -> Session:
        session = self._start()
        install()  # may refuse an unsupported client version: before the block is entered
        self.session = session
        session._token = CURRENT.set(session)
        if session.draws is not None:
            activate_draws()
        return session

    def __exit__(self, exc_type: Any = None, exc: Any = None, tb: Any = None) -> None:
        session = CURRENT.get()
        if session is None:
            raise UsageError("casstore.use(): exit without a matching enter in this context")
        try:
            session.close(ok=exc_type is None and not session.discarded)
        finally:
            CURRENT.reset(session._token)
            if session.draws is not None:
                deactivate_draws()
            uninstall()


# The front's spelling: ``casstore.use(...)`` makes a :class:`Use`.
use = Use


class Guard(_Block):
    """What :func:`guard` returns: a context manager and a decorator (sync and async)."""

    def __init__(self, block_network: bool | None, allowed_hosts: tuple[str, ...]) -> None:
        self.block_network = block_network
        self.allowed_hosts = allowed_hosts
        self._undo: list[Callable[[], None]] = []

    def __enter__(self) -> Guard:
        install()  # outside every use() block, calls are checked (offline mode)
        self._undo = [uninstall, allow_hosts(self.allowed_hosts)]
        block = self.block_network if self.block_network is not None else env_flag("CASSTORE_BLOCK_NETWORK")
        if env_flag("CASSTORE_OFFLINE") or block:  # child processes started meanwhile guard themselves
            from . import child

            self._undo.append(child.export(self.allowed_hosts, block_network=block))
        if block:
            install_socket_guard(self.allowed_hosts)
            self._undo.append(uninstall_socket_guard)
        return self

    def __exit__(self, *exc: Any) -> None:
        undo, self._undo = self._undo, []
        for step in reversed(undo):
            step()

    def _fresh(self) -> Guard:
        return Guard(self.block_network, self.allowed_hosts)


def guard(*, block_network: bool | None = None, allowed_hosts: tuple[str, ...] | list[str] = ()) -> Guard:
    """Hold casstore's network guards for a whole program, as the pytest plugin does for a
    run (``block_network`` defaults to ``CASSTORE_BLOCK_NETWORK``)."""
    return Guard(block_network, tuple(allowed_hosts))


@contextlib.contextmanager
def block_network(allowed_hosts: Iterable[str] = ()) -> Iterator[None]:
    """The socket guard for a block of code (child processes started inside hold it too)."""
    from . import child

    hosts = tuple(allowed_hosts)
    install_socket_guard(hosts)
    undo = child.export(hosts, block_network=True)
    try:
        yield
    finally:
        undo()
        uninstall_socket_guard()


def _tool_begin(name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[str, Any, Session | None]:
    """``("pass", None, None)`` outside a block or inside another tool, else the session's decision."""
    session = active()
    if session is None or active(IN_TOOL) is not None:
        return "pass", None, None
    action, payload = session.begin_tool(name, args, kwargs)
    return action, payload, session


@contextlib.contextmanager
def _tool_live(session: Session, call: Any) -> Iterator[dict[str, Any]]:
    """Run a tool live inside: records its result (set ``out["result"]``) or its exception."""
    out: dict[str, Any] = {}
    token = IN_TOOL.set(session)
    try:
        yield out
    except Exception as exc:
        session.finish(call, {"error": encode_exception(exc)})
        raise
    finally:
        IN_TOOL.reset(token)
    session.finish(call, {"result": jsonable(out.get("result"))})


def _wrap_tool(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_tool(*args: Any, **kwargs: Any) -> Any:
            action, payload, session = _tool_begin(name, args, kwargs)
            if session is None:
                return await fn(*args, **kwargs)
            if action == "serve":
                return tool_outcome(payload)
            with _tool_live(session, payload) as out:
                out["result"] = await fn(*args, **kwargs)
            return out["result"]

        return async_tool

    @functools.wraps(fn)
    def sync_tool(*args: Any, **kwargs: Any) -> Any:
        action, payload, session = _tool_begin(name, args, kwargs)
        if session is None:
            return fn(*args, **kwargs)
        if action == "serve":
            return tool_outcome(payload)
        with _tool_live(session, payload) as out:
            out["result"] = fn(*args, **kwargs)
        return out["result"]

    return sync_tool


@overload
def tool(name: Callable[..., Any], fn: None = None) -> Callable[..., Any]: ...
@overload
def tool(name: str | None = None, fn: None = None) -> Callable[[F], F]: ...
@overload
def tool(name: str, fn: F) -> F: ...


def tool(name: Any = None, fn: Any = None) -> Any:
    """Record a function's arguments → result (or raised exception); replay returns it as
    its JSON form without running the function. ``tool(name, fn)`` or a decorator."""
    if callable(name) and fn is None:
        return _wrap_tool(getattr(name, "__qualname__", repr(name)), name)
    if fn is None:
        return lambda f: _wrap_tool(name or getattr(f, "__qualname__", repr(f)), f)
    if not isinstance(name, str) or not name:
        raise UsageError("casstore.tool(name, fn): name must be a non-empty string")
    return _wrap_tool(name, fn)
