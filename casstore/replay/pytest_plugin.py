"""The pytest plugin: the ``casstore`` marker and ``cassette`` fixture, its options, the run's
network guards, vcrpy's and pytest-recording's interfaces, the pin at the end of a local run
(docs/replay.md). A failing test writes no cassette.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Callable, Generator, Iterator
from typing import Any

import pytest

from ..model.names import name_from_test_id
from .guard import allow_hosts, env_flag
from .guard import offline as offline_now
from .modes import MODES
from .pytest_outcome import FAILED, call_failed

__all__ = ["cassette", "recording_loaded"]

_PINNER = pytest.StashKey[Any]()
_PINNED = pytest.StashKey[list[tuple[str, bool]]]()  # (line, is a refusal) for the terminal summary
_UNDO = pytest.StashKey[list[Callable[[], None]]]()

def recording_loaded(pluginmanager: pytest.PytestPluginManager) -> bool:
    """Whether pytest-recording is registered (by its entry point or ``-p``)."""
    if pluginmanager.has_plugin("recording") or pluginmanager.has_plugin("pytest_recording.plugin"):
        return True
    return any(getattr(p, "__name__", "") == "pytest_recording.plugin" for p in pluginmanager.get_plugins())


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """The run's network guards before the root conftest.py is imported, and pytest-recording's
    interface when no plugin serves it (every plugin is registered by now)."""
    early_config.stash[_UNDO] = _start_guards(early_config, early_config.known_args_namespace) + _serve_vcrpy()
    pm = early_config.pluginmanager
    pytest_vcr_loaded = any(getattr(p, "__name__", "") == "pytest_vcr" for p in pm.get_plugins())
    if recording_loaded(pm) or pytest_vcr_loaded or pm.has_plugin("casstore.pytest_vcr"):
        return
    from . import pytest_vcr

    pm.register(pytest_vcr, "casstore.pytest_vcr")
    pm.add_hookspecs(pytest_vcr.RecordingHooks)


def _serve_vcrpy() -> list[Callable[[], None]]:
    """With vcrpy installed, its cassettes are served from casstore once their file is gone."""
    if importlib.util.find_spec("vcr") is None:
        return []
    from ..interop import vcr_install

    vcr_install.install()
    return [vcr_install.uninstall]


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("casstore", "casstore cassette record/replay")
    group.addoption(
        "--casstore-mode",
        choices=MODES,
        help="record/replay mode for every casstore.use() block (beats CASSTORE_MODE and config)",
    )
    group.addoption(
        "--casstore-block-network",
        action="store_true",
        help="refuse every socket connection to a host not allowed, for the whole run (also: CASSTORE_BLOCK_NETWORK=1)",
    )
    group.addoption(
        "--casstore-allowed-hosts",
        action="append",
        default=[],
        metavar="H1,H2",
        help="hosts (names or IPs, optionally :port) live calls may reach under CASSTORE_OFFLINE=1 "
        "and --casstore-block-network (adds to CASSTORE_ALLOWED_HOSTS and [replay] allowed_hosts)",
    )
    group.addoption(
        "--casstore-all-played",
        action="store_true",
        help="every casstore.use() block raises casstore.NotAllPlayed when it leaves recorded entries unplayed",
    )
    group.addoption(
        "--casstore-no-pin",
        action="store_true",
        help="do not pin at the end of the run what it recorded (also: CASSTORE_PIN=0, [replay] pin = false)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "casstore(name=None, mode=None, **use_kwargs): run the test inside casstore.use(); "
        "the cassette name defaults to one derived from the test id",
    )
    mode = config.getoption("casstore_mode", default=None)
    all_played = config.getoption("casstore_all_played", default=False)
    if mode or all_played:
        from . import api

        api.set_forced_mode(mode)
        api.set_forced_all_played(all_played)
    if _UNDO not in config.stash:  # pytest_load_initial_conftests did not run (a plugin object)
        config.stash[_UNDO] = _start_guards(config, config.option) + _serve_vcrpy()
    if recording_loaded(config.pluginmanager) and config.getoption("record_mode", default=None) == "rewrite":
        from ..interop.vcr_persister import REWRITE

        REWRITE["on"] = True  # pytest-recording deletes the file: the pinned copy is not built on
        config.stash[_UNDO].append(lambda: REWRITE.update(on=False))


def _start_guards(config: pytest.Config, options: Any) -> list[Callable[[], None]]:
    """The run's network guards from the parsed command line ``options``."""
    hosts = [h for opt in getattr(options, "casstore_allowed_hosts", None) or [] for h in opt.split(",")]
    offline = offline_now()
    block = getattr(options, "casstore_block_network", False) or env_flag("CASSTORE_BLOCK_NETWORK")
    if not (offline or block or hosts):
        return []
    with contextlib.suppress(Exception):  # a broken config is reported by the first use() block
        from ..config import locate

        hosts += list(locate(config.rootpath)[1].allowed_hosts)
    allow = allow_hosts(hosts)
    undo = [] if offline else [allow]  # offline: the hosts stay allowed as long as the guard
    if offline:
        from . import install  # the client adapters: imported only when a run asks for the guard

        install.install()  # held until the process exits (no undo): atexit calls stay refused
    if offline or block:
        from . import child

        done = child.export(hosts, block_network=block)  # child processes guard themselves (casstore-offline.pth)
        if not offline:
            undo.append(done)
    if block:
        from .socket_guard import install_socket_guard, uninstall_socket_guard

        install_socket_guard()
        undo.append(uninstall_socket_guard)
    return undo


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.getoption("casstore_mode", default=None) or config.getoption("casstore_all_played", default=False):
        from . import api

        api.set_forced_mode(None)
        api.set_forced_all_played(False)
    undos: list[Callable[[], None]] = config.stash.get(_UNDO, [])
    for undo in reversed(undos):
        undo()
    config.stash[_UNDO] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    config = session.config
    if hasattr(config, "workerinput"):  # an xdist worker: the controller pins what every worker wrote
        return
    from .autopin import Pinner

    pinner = Pinner.start(no_pin=config.getoption("casstore_no_pin", default=False),
                          forced_mode=config.getoption("casstore_mode", default=None))
    if pinner is not None:
        config.stash[_PINNER] = pinner


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Pin what this run recorded; a refused cassette fails the run."""
    config = session.config
    pinner = config.stash.get(_PINNER, None)
    if pinner is None:
        return
    del config.stash[_PINNER]
    lines: list[tuple[str, bool]] = []
    ok = pinner.finish(lambda line: lines.append((line, False)), lambda line: lines.append((line, True)))
    if not ok and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if config.pluginmanager.get_plugin("terminalreporter") is None:
        for line, _ in lines:
            print(line, file=sys.stderr)
    else:
        config.stash[_PINNED] = lines


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    for line, bad in config.stash.get(_PINNED, []):
        terminalreporter.write_line(line, red=bad, bold=bad)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[FAILED] = True
    return report


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The active casstore session for this test (see the module doc)."""
    from .api import use

    marker = request.node.get_closest_marker("casstore")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        kwargs.setdefault("name", marker.args[0])
    if not kwargs.get("name"):
        kwargs["name"] = name_from_test_id(request.node.nodeid)
    block = use(**kwargs)
    session = block.__enter__()
    try:
        yield session
    finally:
        if call_failed(request.node):
            session.discard()
        block.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _casstore_marker(request: pytest.FixtureRequest) -> None:
    """Tests carrying ``@pytest.mark.casstore`` get the ``cassette`` fixture implicitly."""
    if request.node.get_closest_marker("casstore") is not None:
        request.getfixturevalue("cassette")
