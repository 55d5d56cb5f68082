"""pytest-recording's markers, fixtures and options served by casstore's engine when neither
pytest-recording nor pytest-vcr is loaded (docs/migrating.md).
"""

from __future__ import annotations

import collections
import contextlib
import copy
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

import pytest

from ..errors import UsageError
from ..model.vcr_names import clean_parts, vcr_cassette_path, vcr_default_name, vcr_file_name

__all__ = ["MODE_MAP", "RECORD_MODES", "RecordingHooks", "VCR_MATCH_ON", "vcr_normalizer", "hosts_from_patterns"]

RECORD_MODES = ("once", "new_episodes", "none", "all", "rewrite")
# pytest-recording / vcrpy record mode -> casstore mode
MODE_MAP = {
    "none": "replay",
    "once": "auto",
    "new_episodes": "record-new",
    "all": "record",
    "rewrite": "record",
}
# vcrpy options casstore honours, or that need nothing from it (it always stores decoded
# bodies, never writes a failed test's calls, names files itself)
_KNOWN = frozenset(
    {"record_mode", "filter_headers", "filter_query_parameters", "filter_post_data_parameters", "match_on",
     "allow_playback_repeats", "allowed_hosts", "decode_compressed_response", "serializer", "persister",
     "cassette_library_dir", "path_transformer"}
)
_WHY_NOT = {
    "before_record_request": "a callable that rewrites requests; write a casstore normalizer "
    "(casstore.use(normalizer=...)) for identity, [redaction] for secrets",
    "before_record_response": "a callable that rewrites responses; use [redaction] in casstore.toml for secrets",
    "before_record": "a callable that rewrites requests; write a casstore normalizer",
    "ignore_localhost": "calls to ignored hosts are not passed through; allow the host "
    "(--casstore-allowed-hosts) and keep those calls out of the test's cassette",
    "ignore_hosts": "calls to ignored hosts are not passed through; allow the hosts "
    "(--casstore-allowed-hosts) and keep those calls out of the test's cassette",
    "record_on_exception": "casstore never writes the calls of a failed test",
    "custom_patches": "casstore intercepts httpx, requests and the clients in docs/replay.md itself",
    "func_path_generator": "cassette names come from the test (default_cassette_name)",
    "inject_cassette": "the vcr fixture gives the session instead",
    "drop_unused_requests": "use --casstore-mode=refresh to keep only the calls a run makes",
}
# vcrpy's default match_on (method + URI), and its built-in matchers and the identity parts they keep
VCR_MATCH_ON = ("method", "scheme", "host", "port", "path", "query")
_URL_PARTS = ("scheme", "host", "port", "path", "query")
_MATCHERS = frozenset({"method", "uri", "url", *_URL_PARTS, "body", "raw_body", "headers"})


class RecordingHooks:
    """pytest-recording's hook, declared so a conftest implementing it loads (never called)."""

    @staticmethod
    @pytest.hookspec
    def pytest_recording_configure(config: pytest.Config, vcr: Any) -> None:
        """Configure the vcrpy ``VCR`` of a test (pytest-recording)."""


# vcrpy options casstore cannot honour, each named once in the run's summary (a line, not
# a warning: suites commonly run with filterwarnings = error)
_notes: dict[str, str] = {}


def _warn_once(key: str, why: str) -> None:
    _notes.setdefault(key, f"casstore: vcr option {key!r} is not supported and is ignored: {why}")


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for line in _notes.values():
        terminalreporter.write_line(line)
    _notes.clear()


def _names(values: Any) -> list[str]:
    """Names from a vcrpy filter list: ``"name"`` or ``("name", replacement)``."""
    out: list[str] = []
    for v in values or ():
        if isinstance(v, (tuple, list)) and v:
            v = v[0]
        if isinstance(v, str):
            out.append(v)
    return out


def vcr_normalizer(config: Mapping[str, Any]) -> Any:
    """An identity normalizer for vcrpy's ``filter_*`` and ``match_on`` options, or ``None``:
    it drops what vcrpy filtered out and keeps only the parts the matchers compare."""
    headers = {h.lower() for h in _names(config.get("filter_headers"))}
    query = set(_names(config.get("filter_query_parameters")))
    post = set(_names(config.get("filter_post_data_parameters")))
    match_on = config.get("match_on", VCR_MATCH_ON)
    keep: set[str] | None = None
    if match_on is not None:
        keep = set()
        for m in match_on:
            if isinstance(m, str) and m in _MATCHERS:
                keep.update(_URL_PARTS if m in ("uri", "url") else (m,))
            else:
                _warn_once(f"match_on={getattr(m, '__name__', m)!r}", "a custom matcher; casstore matches by call identity")
    if not (headers or query or post or keep is not None):
        return None

    def normalize(doc: dict[str, Any]) -> dict[str, Any]:
        if doc.get("kind") == "tool":  # vcrpy's options are about HTTP requests
            return doc
        if isinstance(doc.get("headers"), dict) and headers:
            doc["headers"] = {k: v for k, v in doc["headers"].items() if k.lower() not in headers}
        target = doc.get("target")
        if isinstance(target, str) and (query or keep is not None):
            method, _, url = target.partition(" ")
            base, _, query_text = url.partition("?")
            pairs = [(k, v) for k, v in parse_qsl(query_text, keep_blank_values=True) if k not in query]
            if keep is not None:
                parts = urlsplit(base)
                scheme = parts.scheme if "scheme" in keep else "*"
                host = (parts.hostname or "") if "host" in keep else "*"
                port = f":{parts.port}" if "port" in keep and parts.port else ""
                path = parts.path if "path" in keep else "/*"
                base = f"{scheme}://{host}{port}{path}"
                pairs = pairs if "query" in keep else []
                method = method if "method" in keep else "*"
            doc["target"] = f"{method} {base}" + (f"?{urlencode(pairs)}" if pairs else "")
        if post:
            body = doc.get("body")
            if isinstance(body, dict) and isinstance(body.get("json"), dict):
                body["json"] = {k: v for k, v in body["json"].items() if k not in post}
            elif isinstance(body, dict) and isinstance(body.get("form"), list):
                body["form"] = [p for p in body["form"] if not (isinstance(p, list) and p and p[0] in post)]
            if isinstance(doc.get("input"), dict):
                doc["input"] = {k: v for k, v in doc["input"].items() if k not in post}
        if keep is not None:
            if "headers" not in keep:
                doc["headers"] = {}
            if not keep & {"body", "raw_body"}:
                doc.pop("body", None)
                doc.pop("input", None)
        return doc

    # a matching that names the host (or scheme, port) makes it count for LLM calls too
    normalize.with_target = keep is not None and bool(keep & {"scheme", "host", "port"})  # type: ignore[attr-defined]
    return normalize


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("recording", "pytest-recording's options, served by casstore")
    group.addoption("--record-mode", action="store", default=None, choices=RECORD_MODES,
                    help="pytest-recording's record mode, mapped to a casstore mode "
                         "(none=replay, once=auto, new_episodes=record-new, all/rewrite=record). Default: none.")
    group.addoption("--block-network", action="store_true", default=False,
                    help="Block network access except for recording (casstore's socket guard, "
                         "as --casstore-block-network).")
    group.addoption("--allowed-hosts", action="store", default=None,
                    help="Comma-separated regexes of hosts the network block lets through.")
    group.addoption("--disable-recording", action="store_true", default=False,
                    help="Run @pytest.mark.vcr tests without casstore (live).")


def pytest_configure(config: pytest.Config) -> None:
    for line in (
        "vcr: run the test inside casstore.use() on the cassette pytest-recording would use (served by casstore)",
        "block_network: block network access except for recording (served by casstore)",
        "default_cassette: override the default cassette name (served by casstore)",
        "allowed_hosts: regexes of hosts the network block lets through (served by casstore)",
    ):
        config.addinivalue_line("markers", line)


def _merged(config: Mapping[str, Any], markers: list[pytest.Mark]) -> dict[str, Any]:
    """vcr_config updated by each marker's keywords, the closest marker last (pytest-recording)."""
    merged = copy.deepcopy(dict(config))
    for marker in reversed(markers):
        merged.update(marker.kwargs)
    return merged


@pytest.fixture(scope="session")
def record_mode(request: pytest.FixtureRequest) -> str:
    """``--record-mode``, ``"none"`` when not given (pytest-recording's default)."""
    return request.config.getoption("record_mode") or "none"


@pytest.fixture(scope="session")
def disable_recording(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("disable_recording"))


@pytest.fixture
def vcr_config() -> dict[str, Any]:
    """Override in a conftest (any scope) to configure every marked test."""
    return {}


@pytest.fixture
def vcr_markers(request: pytest.FixtureRequest) -> list[pytest.Mark]:
    return list(request.node.iter_markers(name="vcr"))


@pytest.fixture(scope="module")
def vcr_cassette_dir(request: pytest.FixtureRequest) -> str:
    """``<test module dir>/cassettes/<module name>``, as pytest-recording."""
    module = Path(str(request.node.fspath))
    return os.path.join(str(module.parent), "cassettes", module.stem)


@pytest.fixture
def default_cassette_name(request: pytest.FixtureRequest) -> str:
    marker = request.node.get_closest_marker("default_cassette")
    if marker is not None:
        if not marker.args:
            raise UsageError("pass the cassette name to @pytest.mark.default_cassette(NAME)")
        return str(marker.args[0])
    return vcr_default_name(request.cls, request.node.name)


@pytest.fixture
def allowed_hosts(request: pytest.FixtureRequest) -> list[str] | None:
    """``block_network(allowed_hosts=...)`` marker, else ``--allowed-hosts``, else vcr_config."""
    marker = request.node.get_closest_marker("block_network")
    hosts = (
        (marker.kwargs.get("allowed_hosts") if marker is not None else None)
        or request.config.getoption("allowed_hosts")
        or request.getfixturevalue("vcr_config").get("allowed_hosts")
    )
    if isinstance(hosts, str):
        hosts = hosts.split(",")
    return list(hosts) if hosts else None


def _effective_vcr_mode(request: pytest.FixtureRequest, markers: list[pytest.Mark], cli_mode: str) -> tuple[str, bool]:
    """``(vcrpy record mode, explicit)``: marker and vcr_config → ``--record-mode`` → ``none``."""
    merged = _merged(request.getfixturevalue("vcr_config"), markers)
    if "record_mode" in merged:
        return str(merged["record_mode"]), True
    return cli_mode, request.config.getoption("record_mode") is not None


@pytest.fixture(autouse=True)
def block_network(request: pytest.FixtureRequest, record_mode: str, vcr_markers: list[pytest.Mark]) -> Iterator[None]:
    """Block the network (casstore's socket guard) unless a marked test records."""
    marker = request.node.get_closest_marker("block_network")
    if marker is not None and (marker.args or set(marker.kwargs) - {"allowed_hosts"}):
        raise UsageError("@pytest.mark.block_network accepts only the keyword argument allowed_hosts")
    mode = record_mode
    if vcr_markers:
        mode, _ = _effective_vcr_mode(request, vcr_markers, record_mode)
    if (marker is not None or request.config.getoption("block_network")) and (not vcr_markers or mode == "none"):
        from .api import block_network as socket_guard

        with socket_guard(hosts_from_patterns(request.getfixturevalue("allowed_hosts") or ())):
            yield
    else:
        yield


_PLAIN_HOST = re.compile(r"^[A-Za-z0-9_\-.:\[\]]+$")


def hosts_from_patterns(patterns: Any) -> list[str]:
    """pytest-recording's allowed hosts (regexes) as casstore's guard takes them (host names,
    IPs, ``*.suffix``); a pattern that does not translate is named once and left out."""
    out: list[str] = []
    for pattern in patterns:
        for alt in str(pattern).strip().strip("^$").split("|"):
            text = alt.strip().strip("()").strip("^$").replace("\\.", ".")
            if text.startswith(".*."):
                text = "*." + text[3:]
            if text and (_PLAIN_HOST.match(text) or (text.startswith("*.") and _PLAIN_HOST.match(text[2:]))):
                out.append(text)
            elif text:
                _warn_once(f"allowed_hosts={pattern!r}", "casstore's network guard takes host names, IPs and *.suffix, not regexes")
    return out


class VcrCassette:
    """The ``vcr`` fixture's value: the casstore session with the vcrpy ``Cassette`` attributes."""

    def __init__(self, session: Any, name: str, record_mode: str = "none") -> None:
        self.session = session
        self.name = name
        self.record_mode = record_mode

    def _entries(self) -> list[dict[str, Any]]:
        return [*self.session.base_entries, *self.session.new_entries]

    def _interactions(self) -> list[dict[str, Any]]:
        from ..interop.export import to_vcr_dict
        from ..model.cassette import Cassette

        data, _ = to_vcr_dict(Cassette(name=self.name, entries=tuple(self._entries())))
        return list(data["interactions"])

    @property
    def requests(self) -> list[Any]:
        try:
            from vcr.request import Request
        except ImportError:
            Request = _Request  # noqa: N806 - vcrpy's class when it is there
        return [Request(**i["request"]) for i in self._interactions()]

    @property
    def responses(self) -> list[dict[str, Any]]:
        out = []
        for i in self._interactions():
            body = i["response"]["body"]
            if isinstance(body.get("string"), str):
                body["string"] = body["string"].encode("utf-8")
            out.append(i["response"])
        return out

    def __len__(self) -> int:
        return len(self._entries())

    @property
    def play_counts(self) -> collections.Counter[int]:
        unplayed = {id(e) for e in self.session.unplayed()}
        return collections.Counter({i: 1 for i, e in enumerate(self.session.base_entries) if id(e) not in unplayed})

    @property
    def play_count(self) -> int:
        return int(self.session.served)

    @property
    def all_played(self) -> bool:
        return bool(self.session.all_played())

    def __getattr__(self, item: str) -> Any:
        return getattr(self.session, item)


class _Request:
    """vcrpy's ``Request`` fields, without vcrpy."""

    def __init__(self, method: str, uri: str, body: Any, headers: Mapping[str, Any]) -> None:
        self.method, self.uri = method, uri
        self.body = body.encode("utf-8") if isinstance(body, str) else body
        self.headers = {k: (v[0] if isinstance(v, list) and v else v) for k, v in headers.items()}


def _cassette_name(path: Path, project: Any) -> str:
    name = vcr_file_name(path, cassette_dir=project.cassette_dir, root=project.root)
    return name if name is not None else clean_parts([path.stem])


@pytest.fixture(autouse=True)
def vcr(
    request: pytest.FixtureRequest,
    vcr_markers: list[pytest.Mark],
    vcr_cassette_dir: str,
    record_mode: str,
    disable_recording: bool,
) -> Iterator[VcrCassette | None]:
    """A test marked ``@pytest.mark.vcr`` runs inside ``casstore.use()`` on its cassette."""
    if disable_recording or not vcr_markers or request.node.get_closest_marker("casstore") is not None:
        yield None
        return
    from ..project import Project
    from .api import use
    from .pytest_outcome import call_failed

    config = _merged(request.getfixturevalue("vcr_config"), vcr_markers)
    for key in sorted(config):
        if key in _WHY_NOT:
            if config[key] not in (None, False, (), []):
                _warn_once(key, _WHY_NOT[key])
        elif key not in _KNOWN:
            _warn_once(key, "not a vcrpy option casstore knows")
    vcr_mode, explicit = _effective_vcr_mode(request, vcr_markers, record_mode)
    if vcr_mode not in MODE_MAP:
        raise UsageError(f"record_mode {vcr_mode!r}: use one of {', '.join(RECORD_MODES)}")
    project = Project.discover()
    mode: str | None = MODE_MAP[vcr_mode]
    if not explicit and getattr(project.config, "mode", None):
        mode = None  # the casstore.toml mode beats pytest-recording's implicit "none"
    directory = str(config.get("cassette_library_dir") or vcr_cassette_dir)
    serializer = str(config.get("serializer") or "yaml")
    path = vcr_cassette_path(directory, request.getfixturevalue("default_cassette_name"), serializer)
    name = _cassette_name(path, project)
    normalizer = vcr_normalizer(config)
    filtered = [n for key in ("filter_headers", "filter_query_parameters", "filter_post_data_parameters")
                for n in _names(config.get(key))]
    redaction = None
    if filtered:
        redaction = copy.deepcopy(dict(getattr(project.config, "redaction", None) or {}))
        redaction["keys"] = sorted({*redaction.get("keys", []), *filtered})
    block = use(name, mode, normalizer=normalizer, redaction=redaction)
    session = block.__enter__()
    try:
        if config.get("allow_playback_repeats"):
            session.allow_repeats = True
        for extra in (p for marker in vcr_markers for p in marker.args):
            extra_path = Path(extra) if os.path.isabs(str(extra)) else Path(directory) / str(extra)
            with contextlib.suppress(UsageError):
                other = project.resolve_cassette(_cassette_name(extra_path, project))
                if other is not None:
                    session.add_playback(other)
        yield VcrCassette(session, name, vcr_mode)
    finally:
        if call_failed(request.node):
            session.discard()
        block.__exit__(None, None, None)
