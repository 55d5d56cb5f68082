"""`casstore demo`: the whole job in one command, offline, as a new user runs it (a real process)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.helpers.commands import run_casstore_subprocess


def _steps(out: str) -> dict[str, list[str]]:
    """The demo's output by step: each `$ command` with the lines under it."""
    steps: dict[str, list[str]] = {}
    current: list[str] = []
    for line in out.splitlines():
        if line.startswith("$ "):
            current = steps.setdefault(line[2:], [])
        else:
            current.append(line.strip())
    return steps


def _check(out: str) -> None:
    steps = _steps(out)
    record = next(v for k, v in steps.items() if k.startswith("python agent.py"))
    replay = next(v for k, v in steps.items() if k.startswith("CI=true CASSTORE_OFFLINE=1 python agent.py") and "7" in k)
    changed = next(v for k, v in steps.items() if k.startswith("CI=true CASSTORE_OFFLINE=1 python agent.py") and "8" in k)
    assert "(the provider received 1 request)" in record, record
    assert "agent: Order 7 shipped yesterday." in replay and "(the provider received 0 requests)" in replay, replay
    assert any("CassetteMiss" in x for x in changed) and any('"order 7?" → ' in x.lower() or "→" in x for x in changed)
    assert "(the provider received 0 requests)" in changed, changed
    assert any(k.startswith("casstore add") for k in steps) and "CI=true casstore pull --frozen" in steps


def test_demo_runs_the_whole_job_offline_and_leaves_nothing_behind(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    r = run_casstore_subprocess("demo", cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    _check(r.stdout)
    assert not list(tmp_path.glob("casstore-demo-*")), "the demo's temporary folder is removed"


def test_demo_without_the_openai_sdk_uses_httpx_and_keeps_no_secret(tmp_path: Path) -> None:
    hide = tmp_path / "no-openai" / "openai"
    hide.mkdir(parents=True)
    (hide / "__init__.py").write_text("raise ImportError('hidden for this test')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(hide.parent), os.environ.get("PYTHONPATH")]))}
    kept = tmp_path / "kept"
    r = run_casstore_subprocess("demo", "--keep", str(kept), cwd=tmp_path, env=env, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    _check(r.stdout)
    assert (kept / "your-repo" / "casstore.lock").is_file() and (kept / "team-store").is_dir()
    for f in kept.rglob("*"):  # the demo's fake key never reaches a file: redacted at record time
        if f.is_file() and ".git" not in f.parts:
            assert b"sk-demo-" not in f.read_bytes(), f
    again = run_casstore_subprocess("demo", "--keep", str(kept), cwd=tmp_path, env=env, timeout=600)
    assert again.returncode == 2 and "not empty" in again.stderr
