"""pytest plugin (entry point ``pytest11``): marker, fixture and ``--casstore-mode``.

* ``@pytest.mark.casstore`` / ``@pytest.mark.casstore(name="x", mode="replay", ...)`` —
  the test runs inside ``casstore.use(...)``; the keyword arguments are those of
  :func:`casstore.use`; the name defaults to one derived from the test id
  (``tests/test_agent.py::test_triage[gpt]`` → ``test_agent/test_triage-gpt``).
* fixture ``cassette`` — the active :class:`casstore.Session` (the marker's, or a
  default one for the test), e.g. to assert ``cassette.mode`` or read ``cassette.drift``.
* ``--casstore-mode=MODE`` — beats ``CASSTORE_MODE``, ``use(mode=...)`` and the config.

A test that fails writes no cassette (a half-run recording is not a recording).
Cassette files are written atomically, one writer at a time per file, so the plugin
is safe under pytest-xdist.
"""

from __future__ import annotations

from collections.abc import Generator, Iterator
from typing import Any

import pytest

from ..model.names import name_from_test_id
from .modes import MODES

__all__ = ["cassette"]

_FAILED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("casstore", "casstore cassette record/replay")
    group.addoption(
        "--casstore-mode",
        action="store",
        dest="casstore_mode",
        default=None,
        choices=MODES,
        help="record/replay mode for every casstore.use() block (beats CASSTORE_MODE and config)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "casstore(name=None, mode=None, **use_kwargs): run the test inside casstore.use(); "
        "the cassette name defaults to one derived from the test id",
    )
    mode = config.getoption("casstore_mode", default=None)
    if mode:
        from . import api as replay

        replay.set_forced_mode(mode)


def pytest_unconfigure(config: pytest.Config) -> None:
    if config.getoption("casstore_mode", default=None):
        from . import api as replay

        replay.set_forced_mode(None)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call" and report.failed:
        item.stash[_FAILED] = True
    return report


def _use_kwargs(request: pytest.FixtureRequest) -> dict[str, Any]:
    marker = request.node.get_closest_marker("casstore")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        kwargs.setdefault("name", marker.args[0])
    if not kwargs.get("name"):
        kwargs["name"] = name_from_test_id(request.node.nodeid)
    return kwargs


@pytest.fixture
def cassette(request: pytest.FixtureRequest) -> Iterator[Any]:
    """The active casstore session for this test (see the module doc)."""
    from .api import use

    block = use(**_use_kwargs(request))
    session = block.__enter__()
    try:
        yield session
    finally:
        if request.node.stash.get(_FAILED, False):
            session.discard()
        block.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _casstore_marker(request: pytest.FixtureRequest) -> None:
    """Tests carrying ``@pytest.mark.casstore`` get the ``cassette`` fixture implicitly."""
    if request.node.get_closest_marker("casstore") is not None:
        request.getfixturevalue("cassette")
