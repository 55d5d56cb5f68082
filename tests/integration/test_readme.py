"""README.md's Quickstart, run word for word as a newcomer would.

The Quickstart's fenced blocks are taken from README.md as they are and run in order:
``bash`` blocks in one ``bash -e`` each (starting where the previous block ended, the
first one next to ``your-repo``, a fresh clone of an empty team repository), the ``python`` block saved
under the path its first-line comment names. The block after the
``<!-- quickstart: ... fresh clone ... -->`` marker runs in a fresh clone of the team
repository (what ``git push`` sent) as CI does: ``CI=true``, an empty cache, no signing key, no provider key.

Only loopback: the S3 bucket ``my-bucket`` lives on moto's server (``AWS_ENDPOINT_URL``) and
the OpenAI SDK talks to the fake provider of ``tests/helpers/llm_server.py`` (``OPENAI_BASE_URL``),
whose request count proves that CI sent nothing.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.commands import REPO, git
from tests.helpers.llm_server import LLMServer
from tests.helpers.s3 import S3Server, fake_aws_env

README = REPO / "README.md"
CI_MARKER = "<!-- quickstart:"
_FENCE = re.compile(r"^(<!-- quickstart:[^\n]*-->\n)?```(\w+)\n(.*?)^```$", re.M | re.S)


def quickstart_blocks(text: str) -> list[tuple[str, str, bool]]:
    """``(language, code, in_ci_clone)`` for each fenced block of the Quickstart section."""
    start = text.index("\n## Quickstart")
    end = text.index("\n## ", start + 1)
    section = text[start:end]
    return [(m.group(2), m.group(3), m.group(1) is not None) for m in _FENCE.finditer(section)]


def _bash(code: str, cwd: Path, env: dict[str, str], state: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run one block in ``bash -e``; return the result and the directory it ended in."""
    script = "set -e\n" + code + f'\npwd > "{state}"\n'
    state.unlink(missing_ok=True)
    res = subprocess.run(["bash", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=300, check=False)
    return res, (Path(state.read_text().strip()) if state.exists() else cwd)


def test_quickstart_blocks_are_found() -> None:
    blocks = quickstart_blocks(README.read_text(encoding="utf-8"))
    langs = [lang for lang, _, _ in blocks]
    assert langs.count("python") == 1 and langs.count("bash") >= 3, langs
    assert [ci for _, _, ci in blocks].count(True) == 1
    assert blocks[-1][2], "the CI block comes last"
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n## Quickstart"):]
    section = section[:section.index("\n## ", 1)]
    assert section.count("```") == 2 * len(blocks), "a fence without a language would be skipped"


def test_readme_quickstart_runs_verbatim(tmp_path: Path, s3_server: S3Server,
                                         isolated_user: Path) -> None:
    blocks = quickstart_blocks(README.read_text(encoding="utf-8"))
    s3_server.client().create_bucket(Bucket="my-bucket")
    bindir = str(Path(sys.executable).parent)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "OPENAI_", "CASSTORE_MODE"))}
    base.update(fake_aws_env())
    base["AWS_ENDPOINT_URL"] = s3_server.endpoint
    base["PATH"] = bindir + os.pathsep + base.get("PATH", "")
    # the code under test, also when it is not the installed casstore
    base["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), base.get("PYTHONPATH", "")) if p)
    base.pop("CI", None)

    dev_env = dict(base)
    dev_env["OPENAI_API_KEY"] = "sk-test-" + "q" * 24  # obviously fake, built at run time

    # the developer's repository is a clone of a team's repository (`git push` reaches it)
    origin = tmp_path / "origin.git"
    git("init", "-q", "--bare", str(origin), cwd=tmp_path)
    user_repo = tmp_path / "your-repo"
    git("clone", "-q", str(origin), str(user_repo), cwd=tmp_path)
    ci_clone = tmp_path / "ci-checkout"

    with LLMServer() as server:
        dev_env["OPENAI_BASE_URL"] = server.url + "/v1"
        cwd = tmp_path
        recorded = None
        for lang, code, in_ci in blocks:
            if lang == "python":
                first = code.splitlines()[0]
                assert first.startswith("# "), "the Python block names its file on its first line"
                target = cwd / first[2:].strip()
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(code, encoding="utf-8")
                continue
            assert lang == "bash", lang
            env = dev_env
            if in_ci:
                recorded = server.count
                assert recorded >= 1, "the recording run reached the provider"
                git("clone", "-q", str(origin), str(ci_clone), cwd=tmp_path)  # what was pushed
                env = dict(base)
                env["CI"] = "true"
                env["OPENAI_BASE_URL"] = server.url + "/v1"  # reachable, so a live call would be counted
                env["CASSTORE_CACHE_DIR"] = str(tmp_path / "ci-cache")
                env["CASSTORE_CONFIG_DIR"] = str(tmp_path / "ci-config")  # no signing key in CI
                cwd = ci_clone
            res, cwd = _bash(code, cwd, env, tmp_path / "pwd")
            assert res.returncode == 0, f"README block failed:\n{code}\n--- stdout\n{res.stdout}\n--- stderr\n{res.stderr}"
            if in_ci:
                assert re.search(r"\b1 passed\b", res.stdout), res.stdout
        assert recorded is not None
        assert server.count == recorded, "the CI run sent a request to the provider"

    # what the Quickstart says is committed is what CI had: no working copy, no store
    tracked = git("ls-files", cwd=ci_clone).stdout.split()
    assert {"casstore.toml", "casstore.lock", ".casstore/trusted_keys", "tests/test_triage.py"} <= set(tracked)
    assert not any(p.startswith(("tests/cassettes/", ".casstore/store")) for p in tracked), tracked
    # the pinned object came from S3, not from the developer's disk
    keys = [o["Key"] for o in s3_server.client().list_objects_v2(Bucket="my-bucket").get("Contents", [])]
    assert any(k.startswith("cassettes/objects/sha256/") for k in keys), keys

