"""What a test process loads when it reaches ``casstore.use`` (issue #19), and that a client
imported only inside a block is still intercepted (the installer patches it when its import
ends).

Counted as the modules in ``sys.modules`` of real child interpreters, never timed
(docs/benchmarks.md has the times); a loopback server's request count proves what went out.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.llm_server import LLMServer

# nothing a replay of a pinned cassette needs before a client makes a call
_NOT_AT_USE = ("httpx", "httpx2", "requests", "aiohttp", "urllib3", "asyncio", "cryptography", "click", "fsspec",
               "ssl", "concurrent", "dulwich")
_NOT_AT_USE_MODULES = ("http.client", "importlib.metadata", "casstore.cli", "casstore.model.redaction",
                       "casstore.model.scrub", "casstore.git.provenance", "casstore.replay.httpx",
                       "casstore.replay.requests", "casstore.replay.aiohttp", "casstore.replay.urllib3",
                       "casstore.replay.httpclient", "casstore.replay.connect")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("CASSTORE_") and k != "CI"}


def _run(script: str, *args: str, cwd: Path | None = None) -> tuple[list[str], set[str]]:
    probe = script + "\nimport sys\nprint('MODULES', ' '.join(sorted(sys.modules)))\n"
    r = subprocess.run([sys.executable, "-c", probe, *args], env=_env(), cwd=cwd, capture_output=True, text=True,
                       timeout=120, check=False)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    out, _, mods = r.stdout.rpartition("MODULES ")
    return out.splitlines(), set(mods.split())


def _roots(mods: set[str], roots: tuple[str, ...]) -> list[str]:
    return sorted(m for m in mods if m.split(".")[0] in roots)


def test_reaching_casstore_use_loads_no_client_adapter_or_recording_code() -> None:
    _, mods = _run("import casstore\ncasstore.use")
    assert "casstore.replay.api" in mods and "casstore.replay.session" in mods  # the probe sees the import
    assert _roots(mods, _NOT_AT_USE) == []
    assert sorted(set(_NOT_AT_USE_MODULES) & mods) == []


# a chat call through each client, its module imported inside the block; prints the answer
CALLS = {
    "requests": "import requests\nprint(requests.post(URL, json=BODY).json()['choices'][0]['message']['content'])",
    "httpx": "import httpx\nprint(httpx.post(URL, json=BODY).json()['choices'][0]['message']['content'])",
    "urllib.request": "import json, urllib.request\n"
                      "req = urllib.request.Request(URL, data=json.dumps(BODY).encode(), "
                      "headers={'content-type': 'application/json'})\n"
                      "print(json.loads(urllib.request.urlopen(req).read())['choices'][0]['message']['content'])",
}
_OTHERS = {"requests": ("httpx", "aiohttp"), "httpx": ("requests", "aiohttp", "urllib3"),
           "urllib.request": ("httpx", "requests", "aiohttp", "urllib3")}


def _block(client: str, mode: str) -> str:
    call = "".join(f"    {line}\n" for line in CALLS[client].splitlines())
    return ("import sys, casstore\n"
            "URL, BODY = sys.argv[1], {'model': 'gpt-4o-mini', 'messages': [{'role': 'user', 'content': 'late'}]}\n"
            f"assert {client.split('.')[0]!r} not in sys.modules or {client!r} == 'urllib.request'\n"
            f"with casstore.use('late', mode={mode!r}, cassette_dir=sys.argv[2]) as session:\n{call}"
            "print('served', session.served, 'live', session.live)\n")


@pytest.mark.parametrize("client", list(CALLS))
def test_a_client_imported_inside_a_block_is_recorded_and_replayed(client: str, llm_server: LLMServer,
                                                                    tmp_path: Path) -> None:
    url = llm_server.url + "/v1/chat/completions"
    recorded, _ = _run(_block(client, "record"), url, str(tmp_path))
    assert recorded[-1] == "served 0 live 1" and llm_server.count == 1
    assert (tmp_path / "late.json").is_file()

    restored = f"\nimport {client}\nfrom casstore.replay import install\nprint('installed', install.installed())\n"
    replayed, mods = _run(_block(client, "replay") + restored, url, str(tmp_path))
    assert replayed[:-2] == recorded[:-1]  # the recorded answer (it names the request's number)
    assert replayed[-2:] == ["served 1 live 0", "installed False"]
    assert llm_server.count == 1  # the replay sent nothing
    assert _roots(mods, _OTHERS[client]) == []  # only the client in use was loaded …
    assert not {f"casstore.replay.{c}" for c in _OTHERS[client]} & mods  # … and its adapter


def test_a_client_imported_inside_a_block_is_restored_when_it_ends(tmp_path: Path) -> None:
    lines, _ = _run("import casstore\n"
                    "with casstore.use('late', mode='live', cassette_dir=sys.argv[1]):\n"
                    "    import requests.adapters\n"
                    "    print(getattr(requests.adapters.HTTPAdapter.send, '__casstore__', False))\n"
                    "print(getattr(requests.adapters.HTTPAdapter.send, '__casstore__', False))\n"
                    .replace("import casstore", "import sys, casstore"), str(tmp_path))
    assert lines == ["True", "False"]


def test_clients_imported_by_two_threads_at_once_inside_a_block_are_both_patched(tmp_path: Path) -> None:
    lines, _ = _run("import sys, threading, casstore\n"
                    "with casstore.use('late', mode='live', cassette_dir=sys.argv[1]):\n"
                    "    go = threading.Barrier(2)\n"
                    "    def load(name):\n"
                    "        go.wait()\n"
                    "        __import__(name)\n"
                    "    threads = [threading.Thread(target=load, args=(n,)) for n in ('requests', 'httpx')]\n"
                    "    [t.start() for t in threads]\n"
                    "    [t.join() for t in threads]\n"
                    "    import requests.adapters, httpx\n"
                    "    print(getattr(requests.adapters.HTTPAdapter.send, '__casstore__', False),\n"
                    "          getattr(httpx.HTTPTransport.handle_request, '__casstore__', False))\n", str(tmp_path))
    assert lines == ["True True"]


def test_the_import_watch_reports_a_nested_import_before_the_outer_one_ends(tmp_path: Path) -> None:
    # another thread may take urllib3 from sys.modules while this one still runs the requests
    # that imported it: the end of the nested import must be reported, not only the outermost
    import importlib
    import sys

    from casstore.replay.hook import ImportWatch, ready

    (tmp_path / "cs_outer_probe.py").write_text("import cs_inner_probe\nSTATE = 'outer done'\n")
    (tmp_path / "cs_inner_probe.py").write_text("STATE = 'inner done'\n")
    seen: list[tuple[object, object]] = []
    watch = ImportWatch(frozenset({"cs_outer_probe", "cs_inner_probe"}),
                        lambda: seen.append((ready("cs_inner_probe") is not None, ready("cs_outer_probe") is not None)),
                        nested=True)  # as the installer watches
    sys.path.insert(0, str(tmp_path))
    watch.start()
    try:
        importlib.import_module("cs_outer_probe")
    finally:
        watch.stop()
        sys.path.remove(str(tmp_path))
        for name in ("cs_outer_probe", "cs_inner_probe"):
            sys.modules.pop(name, None)
    # first report: the inner module complete while the outer one is still initializing
    assert seen == [(True, False), (True, True)]


def test_loading_the_pytest_plugin_imports_no_replay_engine() -> None:
    """pytest imports the plugin in every run: it reads its options and guards, and leaves
    ``casstore.use``'s engine (api, session, the store, the project) to the first test that uses it."""
    _, mods = _run("import casstore.replay.pytest_plugin")
    assert "casstore.replay.pytest_plugin" in mods and "casstore.replay.guard" in mods
    assert sorted({"casstore.replay.api", "casstore.replay.session", "casstore.project", "casstore.store"} & mods) == []
