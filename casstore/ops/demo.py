"""``casstore demo``: the whole job once, offline, in a temporary folder with its own config and
cache: each step a command a user types, against a fake provider on 127.0.0.1 that counts calls."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from ..errors import CasstoreError, UsageError

__all__ = ["DemoStep", "run_demo"]

CASSETTE = "demo_support_reply"
PROMPT = "A customer asks: where is order 7?"
CHANGED_PROMPT = "A customer asks: where is order 8?"

# The "agent" the demo records and replays: one model call, through the OpenAI SDK when it is
# installed, else plain httpx (a casstore dependency), inside casstore.use().
AGENT = f'''\
"""The demo's agent: one model call, answered live, recorded, or replayed by casstore."""
import os
import sys

import casstore

prompt = sys.argv[1]
base = os.environ["DEMO_PROVIDER_URL"]
with casstore.use("{CASSETTE}"):
    try:
        import openai
    except ImportError:
        import httpx

        reply = httpx.post(base + "/chat/completions", json={{
            "model": "gpt-4o-mini", "messages": [{{"role": "user", "content": prompt}}]}},
            headers={{"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}}).json()
        text = reply["choices"][0]["message"]["content"]
    else:
        client = openai.OpenAI(base_url=base, max_retries=0)
        reply = client.chat.completions.create(
            model="gpt-4o-mini", messages=[{{"role": "user", "content": prompt}}])
        text = reply.choices[0].message.content
print("agent:", text)
'''


@dataclass
class DemoStep:
    """One command of the demo, as a user would type it, and what it showed."""

    command: str
    note: str
    exit_code: int
    output: str
    provider_requests: int  # requests the fake provider received during this step
    runs_agent: bool  # a step whose provider count is the point


class _Provider(ThreadingHTTPServer):
    """A fake OpenAI-compatible chat endpoint on 127.0.0.1 that counts what reaches it."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Answer)
        self.count = 0
        self.lock = threading.Lock()

    @contextmanager
    def serving(self) -> Iterator[str]:
        thread = threading.Thread(target=self.serve_forever, name="casstore-demo-provider", daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{self.server_address[1]}/v1"
        finally:
            self.shutdown()
            self.server_close()


class _Answer(BaseHTTPRequestHandler):
    server: _Provider

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        with self.server.lock:
            self.server.count += 1
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        asked = (body.get("messages") or [{}])[-1].get("content", "")
        answer = {"id": "chatcmpl-demo", "object": "chat.completion", "created": 0,
                  "model": body.get("model", "gpt-4o-mini"),
                  "choices": [{"index": 0, "finish_reason": "stop", "message": {
                      "role": "assistant", "content": f"Order {asked.rstrip('?').split()[-1]} shipped yesterday."}}],
                  "usage": {"prompt_tokens": 9, "completion_tokens": 5, "total_tokens": 14}}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def run_demo(keep: Path | None = None, on_step: Callable[[DemoStep], None] | None = None) -> list[DemoStep]:
    """Run the demo in a temporary folder (or ``keep``, left in place), each step passed to
    ``on_step`` as it ends; CasstoreError when a step does not do what it should."""
    if shutil.which("git") is None:
        raise UsageError("the demo needs git on PATH (casstore pins cassettes in a git repository)")
    if keep is not None and keep.exists() and any(keep.iterdir()):
        raise UsageError(f"{keep} is not empty: give --keep a new or empty folder")
    base = keep or Path(tempfile.mkdtemp(prefix="casstore-demo-"))
    try:
        return _run(base.resolve(), on_step or (lambda step: None))
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)


def _run(base: Path, on_step: Callable[[DemoStep], None]) -> list[DemoStep]:
    provider = _Provider()
    steps: list[DemoStep] = []
    repo, clone = base / "your-repo", base / "ci-checkout"
    repo.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("CASSTORE_", "OPENAI_", "AWS_", "GIT_")) and k not in ("CI", "PYTEST_ADDOPTS")}
    env.update({
        "CASSTORE_CONFIG_DIR": str(base / "user-config"),  # the demo's own signing key
        "CASSTORE_CACHE_DIR": str(base / "user-cache"),
        "OPENAI_API_KEY": "sk-demo-" + "0" * 24,  # obviously fake: redacted before anything is written
        "GIT_AUTHOR_NAME": "casstore demo", "GIT_AUTHOR_EMAIL": "demo@example.invalid",
        "GIT_COMMITTER_NAME": "casstore demo", "GIT_COMMITTER_EMAIL": "demo@example.invalid",
        "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1",
    })
    casstore = [sys.executable, "-m", "casstore.cli"]

    def step(shown: str, argv: list[str], note: str, cwd: Path, *, extra: dict[str, str] | None = None,
             expect: int = 0) -> DemoStep:
        before = provider.count
        proc = subprocess.run(argv, cwd=cwd, env={**env, **(extra or {})}, capture_output=True, text=True,
                              check=False)
        done = DemoStep(shown, note, proc.returncode, (proc.stdout + proc.stderr).strip(),
                        provider.count - before, runs_agent="agent.py" in shown)
        steps.append(done)
        on_step(done)
        if proc.returncode != expect:
            raise CasstoreError(f"demo step `{shown}` exited {proc.returncode} (expected {expect}):\n{done.output}")
        return done

    with provider.serving() as url:
        env["DEMO_PROVIDER_URL"] = url
        (repo / "agent.py").write_text(AGENT, encoding="utf-8")
        step("git init", ["git", "init", "-q"], "a project in a git repository", repo)
        step("casstore init --remote ../team-store", [*casstore, "init", "--remote", "../team-store"],
             "config, a signing key, trusted_keys; the team's store (here a folder beside the repository)", repo)
        rec = step(f"python agent.py {PROMPT!r}", [sys.executable, "agent.py", PROMPT],
                   "first run: the call goes to the provider and is recorded (the API key is redacted)", repo)
        if rec.provider_requests != 1:
            raise CasstoreError(f"the recording run sent {rec.provider_requests} request(s) to the provider, not 1")
        step("casstore add tests/cassettes/", [*casstore, "add", "tests/cassettes/"],
             "canonicalize, hash, scan for secrets, sign, pin in casstore.lock", repo)
        step("casstore push", [*casstore, "push"], "upload to the store what it lacks", repo)
        step("git add -A", ["git", "add", "-A"], "casstore.toml, casstore.lock, trusted_keys, the agent", repo)
        step("git commit -m 'Pin the demo cassette'", ["git", "commit", "-q", "-m", "Pin the demo cassette"],
             "the lock in git pins the cassette by digest", repo)
        step("git clone your-repo ci-checkout", ["git", "clone", "-q", str(repo), str(clone)],
             "a fresh checkout, as CI has it", base)
        ci = {"CI": "true", "CASSTORE_OFFLINE": "1", "CASSTORE_CACHE_DIR": str(base / "ci-cache")}
        step("CI=true casstore pull --frozen", [*casstore, "pull", "--frozen"],
             "fetch the pinned cassettes, each verified against the lock and its signature", clone, extra=ci)
        replay = step(f"CI=true CASSTORE_OFFLINE=1 python agent.py {PROMPT!r}", [sys.executable, "agent.py", PROMPT],
                      "replayed from the pinned cassette, the network off", clone, extra=ci)
        if replay.provider_requests:
            raise CasstoreError(f"the replay sent {replay.provider_requests} request(s) to the provider")
        step(f"CI=true CASSTORE_OFFLINE=1 python agent.py {CHANGED_PROMPT!r}",
             [sys.executable, "agent.py", CHANGED_PROMPT],
             "a changed prompt is not in the cassette: CassetteMiss says what differs and what to run", clone,
             extra=ci, expect=1)
    return steps
